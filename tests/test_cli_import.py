"""``comal import DIR``: a folder is walked for transcripts; what is not one is skipped by name."""

# covers: LED-1

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.cli import app
from comal.importers import load
from comal.ledger import open_ledger
from conftest import corpus_dir

runner = CliRunner()

_CLAUDE = "claude-code/cclog_todowrite_examples.jsonl"
_SWE = "swe-agent/function_calling_simple.traj"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two transcripts (one in a nested subfolder), a junk file, and a hidden folder."""
    root = tmp_path / "projects"
    (root / "alpha" / "nested").mkdir(parents=True)
    (root / ".cache").mkdir()
    shutil.copyfile(corpus_dir() / _CLAUDE, root / "alpha" / "session.jsonl")
    shutil.copyfile(corpus_dir() / _SWE, root / "alpha" / "nested" / "run.traj")
    (root / "alpha" / "nested" / "notes.txt").write_text("todo: [bold]not a transcript[/]\n")
    (root / ".cache" / "state.json").write_text('{"not": "walked"}')
    return root


def _import(db: Path, *args: str) -> Any:
    return runner.invoke(app, ["--ledger", str(db), "import", *args])


def _expected(root: Path) -> tuple[int, int]:
    """Sessions and entries the two transcripts hold, read by the importers directly."""
    sessions = [
        *load(root / "alpha" / "session.jsonl"),
        *load(root / "alpha" / "nested" / "run.traj"),
    ]
    return len(sessions), sum(len(s.messages) for s in sessions)


def _stored(db: Path) -> int:
    with open_ledger(db) as led:
        return len(led.sessions())


def test_a_folder_imports_every_transcript_under_it(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    sessions, entries = _expected(folder)
    result = _import(db, str(folder))
    assert result.exit_code == 0, result.output
    imported = [line for line in result.stdout.splitlines() if line.startswith("imported ")]
    assert len(imported) == sessions
    assert any("alpha/nested/run.traj" in line and "(swe-agent:" in line for line in imported)
    junk = folder / "alpha" / "nested" / "notes.txt"
    # The junk file is named, with the stable code and why; the hidden folder is not walked.
    assert f"skipped [IMPORT_FORMAT] {junk}: empty, or not JSON" in result.stderr
    assert "state.json" not in result.output
    summary = result.stdout.splitlines()[-1]
    assert summary == (
        f"3 files: 2 imported ({sessions} new sessions, {entries} entries; "
        "0 sessions already imported), 1 skipped, 0 failed"
    )
    assert _stored(db) == sessions

    # Importing the folder again creates nothing.
    again = _import(db, str(folder))
    assert again.exit_code == 0, again.output
    assert again.stdout.splitlines()[-1] == (
        f"3 files: 2 imported (0 new sessions, 0 entries; {sessions} sessions already "
        "imported), 1 skipped, 0 failed"
    )
    assert all(line.startswith("already imported ") for line in again.stdout.splitlines()[:-1])
    assert _stored(db) == sessions


def test_json_gives_one_object_per_session_or_skipped_file_then_a_summary(
    folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "l.db"
    sessions, entries = _expected(folder)
    result = _import(db, str(folder), "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    *files, last = rows
    stored = [r for r in files if "session" in r]
    skipped = [r for r in files if "skipped" in r]
    assert len(stored) == sessions and len(files) == sessions + 1
    assert all(r["created"] is True for r in stored)
    assert {"path", "session", "format", "entries", "tool_calls", "tool_results"} <= set(stored[0])
    assert {r["format"] for r in stored} == {"claude-code", "swe-agent"}
    assert skipped == [
        {
            "path": str(folder / "alpha" / "nested" / "notes.txt"),
            "skipped": {"code": "IMPORT_FORMAT", "message": skipped[0]["skipped"]["message"]},
        }
    ]
    assert "notes.txt" in skipped[0]["skipped"]["message"]
    assert last == {
        "summary": {
            "files": 3,
            "imported": 2,
            "sessions": sessions,
            "already_imported": 0,
            "entries": entries,
            "skipped": 1,
            "failed": 0,
        }
    }
    again = [json.loads(line) for line in _import(db, str(folder), "--json").stdout.splitlines()]
    assert all(r["created"] is False for r in again if "session" in r)
    assert again[-1]["summary"] == last["summary"] | {
        "sessions": 0,
        "entries": 0,
        "already_imported": sessions,
    }
    assert _stored(db) == sessions


def test_strict_makes_a_file_that_is_not_a_transcript_a_failure(
    folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "l.db"
    sessions, _ = _expected(folder)
    result = _import(db, str(folder), "--strict")
    assert result.exit_code == 2
    assert f"failed [IMPORT_FORMAT] {folder / 'alpha' / 'nested' / 'notes.txt'}" in result.stderr
    assert result.stdout.splitlines()[-1].endswith("0 skipped, 1 failed")
    # One transaction per file: the transcripts beside it are stored all the same.
    assert _stored(db) == sessions


def test_a_forced_format_skips_the_files_of_another_format(folder: Path, tmp_path: Path) -> None:
    result = _import(tmp_path / "l.db", str(folder), "--format", "claude-code", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    swe = next(r for r in rows if r.get("path", "").endswith("run.traj"))
    assert "looks like 'swe-agent', not 'claude-code' (--format)" in swe["skipped"]["message"]
    assert rows[-1]["summary"]["imported"] == 1 and rows[-1]["summary"]["skipped"] == 2


def test_a_named_file_that_fails_shows_its_code_and_cli_advice(tmp_path: Path) -> None:
    # A file named on the command line must import: a fault is a failure, never a skip.
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes((corpus_dir() / _CLAUDE).read_bytes() + b'{"type": "user", "mess')
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    result = _import(tmp_path / "l.db", str(torn), str(junk))
    assert result.exit_code == 2
    assert f"failed [IMPORT_FORMAT] {torn}:" in result.stderr
    assert f"failed [IMPORT_FORMAT] {junk}: " in result.stderr
    assert "--lenient" in result.stderr and "lenient=True" not in result.output
    assert result.stdout.splitlines()[-1] == (
        "2 files: 0 imported (0 new sessions, 0 entries; 0 sessions already imported), "
        "0 skipped, 2 failed"
    )
    lenient = _import(tmp_path / "l.db", str(torn), "--lenient")
    assert lenient.exit_code == 0, lenient.output
    assert "warning" in lenient.stderr and "torn.jsonl" in lenient.stderr


def test_a_folder_with_no_files_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = _import(tmp_path / "l.db", str(tmp_path / "empty"))
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'empty'}: no files in it" in result.stderr
    assert result.stdout.startswith("0 files: 0 imported")


def test_the_progress_bar_counts_files_against_a_total_known_up_front(
    folder: Path, tmp_path: Path
) -> None:
    # A terminal is needed for the bar (it is off in pipes); FORCE_COLOR makes rich draw it.
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-m", "comal", "--ledger", str(tmp_path / "l.db"), "import", str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stderr)
    assert "0/3" in plain and "3/3" in plain and "importing" in plain
    assert set(re.findall(r"\b\d+/(\d+)\b", plain)) == {"3"}  # the total never changes


def test_the_cli_spells_every_import_format() -> None:
    from comal.cli._import import FORMAT_NAMES
    from comal.importers import FORMATS

    assert FORMAT_NAMES == FORMATS
