"""Probe: random byte flips in copies of a ledger file (issue 9 §5).

Each flip lands in its own copy. Opening, verifying and reading the copy back must end in one of:
a coded error, a ``verify`` fault, or data identical to the original (the flip hit free space or
a field nothing reads). Never a traceback, never altered data that verify calls sound.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from comal.errors import ComalError
from comal.ledger import SQLiteLedger, UsageInput, open_ledger, verify
from comal.messages import Message, ToolCall
from comal.tokens import EstimatingCounter, Usage

FLIPS = 60


def _build(path: Path) -> None:
    rng = random.Random(5)
    with open_ledger(path, counter=EstimatingCounter()) as led:
        for s in range(3):
            scope = led.create_session("acme", "coder", title=f"session {s}", meta={"n": s})
            led.append(scope, [Message.user(f"please fix bug {s} in the parser")])
            for i in range(12):
                call = ToolCall(f"c{s}-{i}", "Bash", f'{{"command": "grep -n parse {i}"}}')
                out = "\n".join(f"line {k}: parse_header {rng.random():.6f}" for k in range(8))
                usage = UsageInput(
                    Usage(100 + i, 50, None, 20, None),
                    "m",
                    "anthropic",
                    {"run": f"r{s}", "at": f"2025-01-0{s + 1}T00:00:{i:02d}+00:00",
                     "prompt_last_seq": 2 * i},
                )  # fmt: skip
                step = led.append(scope, [Message.assistant(f"step {i}", call)], usage=usage)
                led.append(scope, [Message.tool(call.id, out)], join_step=step[0].step)
                led.add_record(scope, "receipt", "Bash", {"status": "ok", "call": call.id})
                led.add_record(scope, "event", "turn", {"at_seq": 2 * i})
            led.add_checkpoint(scope, Message.user(f"state of {s}"), first_seq=0, last_seq=10)
            led.add_record(scope, "summary", "leaf", {"text": f"summary of parser work {s}"})


def _snapshot(led: SQLiteLedger) -> Any:
    out: list[Any] = []
    for info in led.sessions():
        scope = info.scope
        out.append(info)
        out.append(led.entries(scope))
        out.append(led.heads(scope))
        out.append(led.tail(scope, tokens=400))
        out.append(led.requests(scope))
        out.append(led.last_request(scope))
        out.append(led.checkpoints(scope))
        out.append([led.records(scope, t) for t in ("receipt", "event", "summary")])
        out.append(led.record_mark(scope))
    out.append(led.spend("acme", since="2025-01-02T00:00:00Z"))
    out.append(led.deletions())
    return out


def _search(led: SQLiteLedger) -> Any:
    return [[h.entry_id for h in led.search(i.scope, "parse_header")] for i in led.sessions()]


def _write(led: SQLiteLedger) -> None:
    """Writes on a damaged copy may fail, but only with a coded error."""
    try:
        for info in led.sessions():
            step = led.append(info.scope, [Message.assistant("more", ToolCall("w", "Bash", "{}"))])
            led.append(info.scope, [Message.tool("w", "done")], join_step=step[0].step)
            led.add_record(info.scope, "receipt", "Bash", {"status": "ok"})
            led.rename_session(info.scope, "renamed")
        led.delete_session(led.sessions()[0].scope, children=True)
    except ComalError:
        pass


def _outcome(path: Path, original: Any, found: Any) -> str:
    """What a damaged copy gives; reads run whatever verify said, so none may raise uncoded."""
    try:
        led = open_ledger(path, create=False)
    except ComalError as exc:
        return f"open error {exc.code}"
    read_error = None
    try:
        report = verify(led, search=True)
        try:
            data, hits = _snapshot(led), _search(led)
        except ComalError as exc:
            read_error = exc.code
        _write(led)
    finally:
        led.close()
    if not report.ok:
        return f"verify fault ({report.faults[0].table} {report.faults[0].kind})"
    if read_error is not None:
        return f"read error {read_error}"
    if data != original:
        return "SILENT: altered data, verify ok"
    return "same" if hits == found else "search hits differ"


def test_random_byte_flips_are_caught_or_harmless(tmp_path: Path) -> None:
    # covers: LED-6
    original_path = tmp_path / "ledger.db"
    _build(original_path)
    with open_ledger(original_path, create=False) as led:
        assert verify(led, search=True).ok
        original, found = _snapshot(led), _search(led)
    size = original_path.stat().st_size
    rng = random.Random(2024)
    outcomes: Counter[str] = Counter()
    for n in range(FLIPS):
        copy = tmp_path / f"flip{n}.db"
        shutil.copyfile(original_path, copy)
        offset, mask = rng.randrange(size), rng.randrange(1, 256)
        with open(copy, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)[0]
            f.seek(offset)
            f.write(bytes([byte ^ mask]))
        outcomes[_outcome(copy, original, found)] += 1
    print(f"\n{FLIPS} flips in a {size:,}-byte ledger:", dict(sorted(outcomes.items())))
    assert not [k for k in outcomes if k.startswith("SILENT")], outcomes
    assert sum(outcomes.values()) == FLIPS


@pytest.mark.parametrize("what", ["receipt status", "tool output", "index"])
def test_targeted_flips(tmp_path: Path, what: str) -> None:
    # covers: LED-6
    path = tmp_path / "ledger.db"
    _build(path)
    data = bytearray(path.read_bytes())
    if what == "receipt status":
        at = data.find(b'"status":"ok"')
        data[at + 10 : at + 12] = b"no"
    elif what == "tool output":
        at = data.find(b"parse_header 0.")
        data[at] ^= 0x20  # p -> P
    else:
        # An index page: flip a byte of the entries_budget index (its root page from the schema).
        with open_ledger(path, create=False) as led, led._reading() as c:
            root = c.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'entries_budget'"
            ).fetchone()[0]
            page = c.execute("PRAGMA page_size").fetchone()[0]
        data = bytearray(path.read_bytes())
        at = (root - 1) * page + page - 12  # inside the cell content area, far from the header
        data[at] ^= 0x01
    path.write_bytes(bytes(data))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with open_ledger(path, create=False) as led:
        report = verify(led)
        assert not report.ok
        fault = report.faults[0]
        if what == "index":
            assert fault.table == "database" and fault.kind == "integrity"
        else:
            table = "records" if what == "receipt status" else "entries"
            assert (fault.table, fault.kind) == (table, "digest") and fault.session is not None
            assert fault.row is not None
            with pytest.raises(ComalError) as err:
                _snapshot(led)
            assert err.value.code == "LEDGER_ROW_DAMAGED"
            assert f"{table} row {fault.row}" in str(err.value)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # verify wrote nothing
