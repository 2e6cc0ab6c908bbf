"""One addressing scheme for evidence: what the model is told (a reference's or a write-time
cut's ``EvidenceRead(...)`` call) is what ``comal evidence`` accepts, and ``comal show`` prints
the ids it takes (``--entry``, and ``--record`` for an output stored whole at write time)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _ops_support import Setup, call, make_setup, propose
from comal.cli import app

# covers: EVI-1, EVI-2, PIP-3

runner = CliRunner()
BIG = "".join(f"line {i}: {'x' * 60}\n" for i in range(600))  # over Read's inline cap


def _cli(db: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--ledger", str(db), *args])
    return result.exit_code, result.stdout


def _session(tmp_path: Path) -> tuple[Setup, int, int, str]:
    """A Read whose output the write-time guard cut: its result entry, record and cut note."""
    s = make_setup(tmp_path, session="sess-ev")
    (s.root / "big.txt").write_text(BIG)
    outcome, receipt = propose(s, call("Read", {"path": "big.txt"}))
    note = outcome.result.text
    found = re.search(r"EvidenceRead\(record=(\d+)[^)]*\)", note)
    assert found, note
    entry = receipt.result_entry
    assert entry is not None
    s.close()
    return s, entry, int(found.group(1)), found.group(0)


def _stored(db: Path, record: int) -> str:
    from comal.ledger import open_ledger

    with open_ledger(db) as led:
        scope = led.resolve("sess-ev")
        rec = led.record(scope, "event", record)
        assert rec is not None
        return str(rec.body["content"])


def test_the_cut_note_call_is_what_the_cli_reads(tmp_path: Path) -> None:
    _s, _entry, record, note_call = _session(tmp_path)
    db = tmp_path / "ledger.db"
    whole = _stored(db, record)
    code, out = _cli(db, "evidence", "sess-ev", note_call, "--json")
    assert code == 0, out
    page = json.loads(out)
    offset = int(re.search(r"offset=(\d+)", note_call).group(1))  # type: ignore[union-attr]
    assert page["offset"] == offset and whole.startswith(page["text"], offset)
    assert page["next_call"].startswith(f"EvidenceRead(record={record},")
    # The next call it prints is read back the same way, to the end.
    code, out = _cli(db, "evidence", "sess-ev", page["next_call"], "--json")
    assert code == 0 and json.loads(out)["offset"] == page["end"]


def test_entry_and_record_options_name_what_they_read(tmp_path: Path) -> None:
    _s, entry, record, _note = _session(tmp_path)
    db = tmp_path / "ledger.db"
    by_record = json.loads(_cli(db, "evidence", "sess-ev", "--record", str(record), "--json")[1])
    assert by_record["offset"] == 0 and _stored(db, record).startswith(by_record["text"])
    cut = "output truncated at write time"
    code, out = _cli(db, "evidence", "sess-ev", "--entry", str(entry), "--search", cut, "--json")
    inline = json.loads(out)
    assert code == 0 and cut in inline["text"]  # the entry is the inline result, with its note
    assert inline["total_utf16"] < by_record["total_utf16"]
    # The call's own spelling, without the wrapper, is the same address.
    code, out = _cli(db, "evidence", "sess-ev", f"record={record}", "--json")
    assert code == 0 and json.loads(out)["text"] == by_record["text"]


@pytest.mark.parametrize("given", [["2"], ["--entry", "2", "--record", "2"], []])
def test_an_ambiguous_or_missing_address_is_a_coded_error(tmp_path: Path, given: list[str]) -> None:
    _session(tmp_path)
    code, out = _cli(tmp_path / "ledger.db", "evidence", "sess-ev", *given, "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "EVIDENCE_ARGUMENT"
    assert "--entry" in error["message"] and "--record" in error["message"]


def test_show_prints_the_ids_evidence_takes(tmp_path: Path) -> None:
    _s, entry, record, _note = _session(tmp_path)
    db = tmp_path / "ledger.db"
    rows = json.loads(_cli(db, "show", "sess-ev", "--json")[1])
    (result,) = [r for r in rows if r["entry"] == entry]
    assert result["record"] == record
    assert all("record" not in r for r in rows if r["entry"] != entry)
    _code, table = _cli(db, "show", "sess-ev")
    line = next(x for x in table.splitlines() if f"record {record}" in x)
    assert re.search(rf"\b{entry}\b", line), table
    assert "--entry" in table and "--record" in table
