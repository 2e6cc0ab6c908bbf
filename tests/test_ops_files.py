"""Native file tools, the write-time output guard and evidence reads (OPS-5, PIP-3, EVI-1/4)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from _ops_support import Setup, call, make_setup, on_cli, propose
from comal.ops import (
    DEFAULT_CAP,
    LARGE_CAP,
    CallContext,
    Operation,
    ToolOutput,
    default_registry,
    read_output,
)

HAS_EVIDENCE = importlib.util.find_spec("comal.evidence") is not None


@pytest.fixture
def s(tmp_path: Path) -> Iterator[Setup]:
    setup = make_setup(tmp_path)
    yield setup
    setup.close()


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def test_read_numbers_lines_like_cat_n(s: Setup) -> None:
    # covers: OPS-5
    (s.root / "a.txt").write_text("alpha\nbeta\ngamma\n")
    outcome, receipt = propose(s, call("Read", {"path": "a.txt"}))
    assert outcome.result.text == "     1\talpha\n     2\tbeta\n     3\tgamma"
    assert receipt.observations["sha256"] == sha("alpha\nbeta\ngamma\n")
    assert receipt.effects[0].kind == "read" and receipt.effects[0].paths == ("a.txt",)
    part, _ = propose(s, call("Read", {"path": "a.txt", "offset": 2, "limit": 1}))
    assert part.result.text.startswith("     2\tbeta\n[1 more lines; continue with Read(")


def test_write_and_edit_record_digests_before_and_after(s: Setup) -> None:
    # covers: OPS-5, RES-3
    _, created = propose(s, call("Write", {"path": "src/m.py", "content": "x = 1\ny = 1\n"}))
    assert created.observations["digest_before"] is None
    assert created.observations["digest_after"] == sha("x = 1\ny = 1\n")
    assert created.preparation is not None
    prep = next(p for p in s.ledger.records(s.scope, "preparation") if p.id == created.preparation)
    assert prep.body["intended_digest"] == sha("x = 1\ny = 1\n")
    _, edited = propose(
        s, call("Edit", {"path": "src/m.py", "old_string": "x = 1", "new_string": "x = 2"})
    )
    assert edited.status == "ok" and edited.observations["postcondition"] is True
    assert edited.observations["digest_before"] == created.observations["digest_after"]
    assert (s.root / "src/m.py").read_text() == "x = 2\ny = 1\n"


def test_edit_requires_a_unique_exact_match_unless_replace_all(s: Setup) -> None:
    # covers: OPS-5
    (s.root / "f.txt").write_text("a a a\n")
    before = len(s.ledger.records(s.scope, "preparation"))
    o, r = propose(s, call("Edit", {"path": "f.txt", "old_string": "a", "new_string": "b"}))
    assert r.status == "error" and "occurs 3 times" in o.result.text
    o, r = propose(s, call("Edit", {"path": "f.txt", "old_string": "zzz", "new_string": "b"}))
    assert r.status == "error" and "not found" in o.result.text
    assert len(s.ledger.records(s.scope, "preparation")) == before  # nothing was prepared
    _, r = propose(
        s,
        call("Edit", {"path": "f.txt", "old_string": "a", "new_string": "b", "replace_all": True}),
    )
    assert r.status == "ok" and (s.root / "f.txt").read_text() == "b b b\n"


def test_edit_refuses_when_the_file_changed_after_planning(tmp_path: Path) -> None:
    # covers: RES-4
    def meddle(phase: str, call_id: str) -> None:
        if phase == "prepared":
            (setup.root / "f.txt").write_text("someone else\n")

    setup = make_setup(tmp_path, probe=meddle)
    (setup.root / "f.txt").write_text("mine\n")
    o, r = on_cli(setup, call("Edit", {"path": "f.txt", "old_string": "mine", "new_string": "x"}))
    assert r.status == "error" and "changed after it was read" in o.result.text
    assert (setup.root / "f.txt").read_text() == "someone else\n"
    assert r.preparation is not None  # the receipt closes the preparation
    setup.close()


def test_glob_and_grep_stay_inside_the_workspace(s: Setup, tmp_path: Path) -> None:
    # covers: OPS-2, OPS-5
    (s.root / "pkg").mkdir()
    (s.root / "pkg/a.py").write_text("import os\nTODO = 1\n")
    (s.root / "pkg/b.txt").write_text("nothing\n")
    (s.root / ".git").mkdir()
    (s.root / ".git/config").write_text("TODO hidden\n")
    (tmp_path / "out.py").write_text("TODO outside\n")
    (s.root / "escape.py").symlink_to(tmp_path / "out.py")
    o, _ = propose(s, call("Glob", {"pattern": "**/*.py"}))
    assert o.result.text == "pkg/a.py"
    o, _ = propose(s, call("Grep", {"pattern": r"TODO\s*=", "output_mode": "content"}))
    assert o.result.text == "pkg/a.py:2:TODO = 1"
    o, _ = propose(s, call("Grep", {"pattern": "todo", "ignore_case": True, "glob": "*.py"}))
    assert o.result.text == "pkg/a.py"
    o, r = propose(s, call("Grep", {"pattern": "(unclosed"}))
    assert r.status == "error" and "bad regular expression" in o.result.text


class BigArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int


def big(args: BigArgs, ctx: CallContext) -> ToolOutput:
    return ToolOutput("".join(f"{i:08d}\n" for i in range(args.n)))


def test_output_over_the_cap_is_stored_whole_and_referenced(tmp_path: Path) -> None:
    # covers: PIP-3, EVI-1, EVI-4, LED-6
    registry = default_registry()
    registry.add(Operation("Big", "big output", BigArgs, big))
    s = make_setup(tmp_path, registry=registry)
    full = big(BigArgs(n=20_000), None)  # type: ignore[arg-type]
    outcome, receipt = propose(s, call("Big", {"n": 20_000}))
    inline = outcome.result.text
    assert len(inline) <= DEFAULT_CAP
    assert inline.startswith("00000000\n") and inline.endswith("00019999\n")
    stored = receipt.output.stored
    assert stored is not None and receipt.output.sha256 == sha(full.text) == stored["sha256"]
    assert f"ledger record {stored['record']}, sha256 {stored['sha256']}" in inline
    assert f'EvidenceRead(record={stored["record"]}, expected_digest="{stored["sha256"]}"' in inline
    assert read_output(s.ledger, s.scope, stored["record"], expected_digest=stored["sha256"]) == (
        full.text
    )
    # EVI-4: the receipt holds digests and sizes, never output bytes.
    assert "00012345" not in json.dumps(receipt.to_body())
    _, small = propose(s, call("Big", {"n": 10}))
    assert small.output.stored is None
    s.close()


def test_file_reads_get_the_larger_cap(s: Setup) -> None:
    # covers: PIP-3
    (s.root / "long.txt").write_text("".join(f"line {i}\n" for i in range(3000)))
    outcome, receipt = propose(s, call("Read", {"path": "long.txt"}))
    assert DEFAULT_CAP < len(outcome.result.text) <= LARGE_CAP
    assert receipt.output.stored is not None


@pytest.mark.skipif(not HAS_EVIDENCE, reason="comal.evidence is missing from this install of comal")
def test_evidence_read_pages_a_stored_output_back_exactly(s: Setup) -> None:
    # covers: EVI-1, EVI-2, PIP-3
    text = "".join(f"row {i} ünïcødé 🐍\n" for i in range(2000))
    (s.root / "big.txt").write_text(text)
    _, receipt = propose(s, call("Read", {"path": "big.txt"}))
    stored = receipt.output.stored
    assert stored is not None
    whole = read_output(s.ledger, s.scope, stored["record"])
    pages: list[str] = []
    args = {"record": stored["record"], "expected_digest": stored["sha256"]}
    for _ in range(50):
        page, r = propose(s, call("EvidenceRead", args))
        assert r.status == "ok", page.result.text
        body = page.result.text
        header, rest = body.split("\n", 1)
        assert header.startswith(f"[EvidenceRead record {stored['record']}")
        content, footer = rest.rsplit("\n", 1)
        pages.append(content)
        nxt = re.search(r"\[next page: EvidenceRead\((.*)\)\]$", footer)
        if nxt is None:
            break
        offset = int(re.search(r"offset=(\d+)", nxt[1])[1])  # type: ignore[index]
        assert nxt[1].startswith(f"record={stored['record']}")
        args = {**args, "offset": offset}
    assert "".join(pages) == whole
    _, bad = propose(
        s, call("EvidenceRead", {"record": stored["record"], "expected_digest": "0" * 64})
    )
    assert bad.status == "error"


@pytest.mark.skipif(not HAS_EVIDENCE, reason="comal.evidence is missing from this install of comal")
def test_evidence_read_of_an_entry(s: Setup) -> None:
    # covers: EVI-1
    (s.root / "a.txt").write_text("hello\n")
    _, first = propose(s, call("Read", {"path": "a.txt"}))
    assert first.result_entry is not None
    page, r = propose(s, call("EvidenceRead", {"entry": first.result_entry, "search": "hello"}))
    assert r.status == "ok" and "     1\thello" in page.result.text
    _, both = propose(s, call("EvidenceRead", {"entry": 1, "record": 1}))
    assert both.judgment["rule"] == "contract:arguments"
