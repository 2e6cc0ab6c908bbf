"""What the model said beside a tool call, and what the tool returned, reach the person (issue
19): ``comal -p`` shows the output's first lines on stderr, escaped; ``comal show`` and the
Markdown export show the model's text with its calls, each once, and a prompt's words apart
from the house's preamble."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.cli import app, main

runner = CliRunner()
LINES = [f"line {n}" for n in range(1, 9)]


def _script(tmp_path: Path) -> Path:
    read = {"type": "tool_use", "id": "r1", "name": "Read", "input": {"path": "log.txt"}}
    replies = [
        {"content": [{"type": "text", "text": "I will read the log first."}, read]},
        {"content": [{"type": "text", "text": "The log has eight lines."}]},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in replies))
    return path


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "log.txt").write_text("\n".join(["\x1b[2Jcleared", *LINES[1:]]) + "\n")
    db = str(tmp_path / "l.db")
    args = ["--ledger", db, "-p", "read the log", "--model", f"script:{_script(tmp_path)}"]
    with pytest.raises(SystemExit) as done:
        main([*args, "--mode", "trusted", "--workspace", str(ws)])
    said = capsys.readouterr()
    assert done.value.code == 0, said.err
    sessions = json.loads(runner.invoke(app, ["--ledger", db, "sessions", "--json"]).stdout)
    return db, sessions[0]["session"], said.err


def test_print_mode_shows_the_models_text_and_the_outputs_first_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: OPS-3
    _, _, err = _run(tmp_path, capsys)
    assert err.count("I will read the log first.") == 1
    assert err.count("→ Read") == 1
    shown = [line for line in err.splitlines() if line.startswith("  │ ")]
    assert shown[0].endswith("\\x1b[2Jcleared")  # escaped: the terminal never acts on it
    assert "\x1b" not in err
    assert any(line.endswith("line 2") for line in shown)
    assert not any("line 8" in line for line in shown)  # bounded: the first lines only
    assert shown[-1].startswith("  │ … ") and "more line(s)" in shown[-1]


def test_show_and_markdown_give_the_models_text_with_its_calls_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: CCH-1, LED-1
    db, session, _ = _run(tmp_path, capsys)
    table = runner.invoke(app, ["--ledger", db, "show", session], terminal_width=240).stdout
    assert "I will read the log first. → Read(" in table
    assert "<context>" not in table and "read the log" in table
    rows: list[dict[str, Any]] = json.loads(
        runner.invoke(app, ["--ledger", db, "show", session, "--json"]).stdout
    )
    assert "<context>" in json.dumps(rows[0]["message"])  # the ledger keeps it whole
    text = runner.invoke(app, ["--ledger", db, "export", session, "-f", "markdown"]).stdout
    assert text.count("I will read the log first.") == 1
    assert text.count("**Read**") == 1 and text.count('{"path":"log.txt"}') == 1
    assert "<context>" not in text and "sender: " in text  # the preamble as metadata
    assert "\nread the log\n" in text
