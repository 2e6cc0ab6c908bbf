"""Corpus → ledger → export: every tool output comes back byte for byte, every file atomically.

The importer tests compare ImportedSession with the raw files; these close the loop through the
ledger and the CLI contract (``import --json``, ``export --format openai``, ``verify --json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from comal.cli import app
from comal.importers import ImportedSession, load, store
from comal.ledger import open_ledger, verify
from comal.messages import Message, Role, Text, sha256_hex
from conftest import corpus_dir

runner = CliRunner()


def _corpus_files() -> list[Path]:
    root = corpus_dir()
    return sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in {".json", ".jsonl", ".traj"}
    )


def test_whole_corpus_imports_exports_and_verifies(tmp_path: Path) -> None:
    # covers: LED-1, LED-6
    db = tmp_path / "corpus.db"
    files = _corpus_files()
    assert len(files) >= 30
    result = runner.invoke(app, ["--ledger", str(db), "import", *map(str, files), "--json"])
    assert result.exit_code == 0, result.output
    *rows, last = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"path", "session", "format", "entries", "tool_calls", "tool_results"} <= set(rows[0])
    assert last["summary"]["files"] == last["summary"]["imported"] == len(files)
    assert last["summary"]["sessions"] == len(rows) and last["summary"]["failed"] == 0
    assert {r["path"] for r in rows} == {str(f) for f in files}

    expected: dict[str, list[str]] = {}
    for path in files:
        for imp, row in zip(load(path), [r for r in rows if r["path"] == str(path)], strict=True):
            assert row["format"] == imp.format
            expected[row["session"]] = [
                sha256_hex(m.tool_result.text) for m in imp.messages if m.tool_result is not None
            ]
    for session, digests in expected.items():
        out = runner.invoke(app, ["--ledger", str(db), "export", session, "-f", "openai", "--json"])
        assert out.exit_code == 0, out.output
        exported = json.loads(out.stdout)
        got = [
            sha256_hex(m["content"] if isinstance(m["content"], str) else _join(m["content"]))
            for m in exported
            if m["role"] == "tool"
        ]
        assert got == digests, session

    report = json.loads(runner.invoke(app, ["--ledger", str(db), "verify", "--json"]).stdout)
    assert report["ok"] and report["faults"] == []

    listed = runner.invoke(app, ["--ledger", str(db), "sessions", "--all", "--json"])
    sessions = json.loads(listed.stdout)
    assert {s["session"] for s in sessions} == set(expected)
    assert all(s["source"] for s in sessions)

    again = runner.invoke(app, ["--ledger", str(db), "import", str(files[0]), "--json"])
    *again_rows, again_summary = [json.loads(line) for line in again.stdout.splitlines()]
    assert again_rows and all(r["created"] is False for r in again_rows)
    assert again_summary["summary"]["sessions"] == 0


def _join(parts: list[dict[str, str]]) -> str:
    return "\n".join(p["text"] for p in parts if p.get("type") == "text")


def test_usage_is_kept_where_the_format_records_it(tmp_path: Path) -> None:
    # covers: TOK-1, TOK-2
    path = next(corpus_dir().glob("mini-swe-agent/deepseek-chat__astropy*"))
    with open_ledger(tmp_path / "u.db") as led:
        (stored,) = store(led, load(path))
        scope = led.resolve(stored.session)
        requests = led.requests(scope)
        assert len(requests) == stored.usages > 0
        assert all(r.new_input is not None and r.output is not None for r in requests)
        entry = led.entry(scope, requests[-1].entry_id or 0)
        assert entry is not None and entry.role == "assistant"


def test_a_failing_file_stores_nothing(tmp_path: Path) -> None:
    # covers: LED-1
    good = ImportedSession("f.json", "openai", "a", None, (Message.user("hi"),), (), {})
    # A body that cannot be serialised fails inside the second session's append.
    broken = Message(Role.USER, (Text(b"raw bytes"),))  # type: ignore[arg-type]
    bad = ImportedSession("f.json", "openai", "b", None, (Message.user("x"), broken), (), {})
    with open_ledger(tmp_path / "a.db") as led:
        with pytest.raises(ValueError, match="canonical JSON"):
            store(led, [good, bad], digest="0" * 64)
        assert led.sessions() == []
        assert verify(led).entries == 0


def test_damaged_file_strict_imports_nothing_lenient_reports(tmp_path: Path) -> None:
    # covers: LED-1
    src = next(corpus_dir().glob("claude-code/ccviewer_1af7fc5e*.jsonl"))
    damaged = tmp_path / "torn.jsonl"
    data = src.read_bytes()
    damaged.write_bytes(data[: len(data) // 2] + b"\x00" * 64 + b'{"type": "user", "mess')
    db = tmp_path / "d.db"
    strict = runner.invoke(app, ["--ledger", str(db), "import", str(damaged), "--json"])
    assert strict.exit_code == 2
    row, summary = map(json.loads, strict.stdout.splitlines())
    assert summary["summary"]["failed"] == 1
    error = row["error"]
    assert error["code"] == "IMPORT_FORMAT" and "torn.jsonl:" in error["message"]
    with open_ledger(db) as led:
        assert led.sessions() == []
    lenient = runner.invoke(
        app, ["--ledger", str(db), "import", str(damaged), "--lenient", "--json"]
    )
    assert lenient.exit_code == 0, lenient.output
    row = json.loads(lenient.stdout.splitlines()[0])
    assert row["warnings"] and all("torn.jsonl" in w for w in row["warnings"])
