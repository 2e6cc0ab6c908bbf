"""The CLI contract: JSON shapes that scripts rely on, help on every command."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from comal.cli import app
from comal.ledger import open_ledger
from comal.messages import Message, ToolCall

runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "cli.db"
    with open_ledger(path) as led:
        scope = led.create_session("t", "a", session_id="sess-1", title="cli test")
        led.append(scope, [Message.system("be brief")])
        led.append(scope, [Message.user("list files")])
        led.append(
            scope,
            [
                Message.assistant("", ToolCall("c1", "Bash", '{"command": "ls"}')),
                Message.tool("c1", "a.txt\r\nb 🐍.txt\n"),
            ],
        )
    return path


def test_sessions_json_contract(db: Path) -> None:
    rows = json.loads(_run("--ledger", str(db), "sessions", "--json"))
    assert rows[0]["session"] == "sess-1"
    assert {"session", "tenant", "agent", "entries", "status", "source"} <= set(rows[0])
    assert rows[0]["entries"] == 4


def test_export_openai_keeps_exact_tool_output(db: Path) -> None:
    # covers: LED-1, LED-6
    out = json.loads(_run("--ledger", str(db), "export", "sess", "--format", "openai", "--json"))
    tool = next(m for m in out if m["role"] == "tool")
    want = hashlib.sha256("a.txt\r\nb 🐍.txt\n".encode()).hexdigest()
    assert hashlib.sha256(tool["content"].encode()).hexdigest() == want
    anthropic = json.loads(_run("--ledger", str(db), "export", "sess", "-f", "anthropic"))
    assert anthropic["messages"][0]["role"] == "user"


def test_verify_json_and_exit_code(db: Path) -> None:
    # covers: LED-6
    report = json.loads(_run("--ledger", str(db), "verify", "--json"))
    assert {k: report[k] for k in ("ok", "entries", "faults", "paused")} == {
        "ok": True, "entries": 4, "faults": [], "paused": [],
    }  # fmt: skip
    assert report["rows"]["entries"] == 4 and report["database"]


def test_show_and_context(db: Path) -> None:
    # covers: TOK-3, TOK-4
    shown = json.loads(_run("--ledger", str(db), "show", "sess-1", "--tail", "2", "--json"))
    assert [e["seq"] for e in shown] == [2, 3]
    ctx = json.loads(
        _run("--ledger", str(db), "context", "sess-1", "--context-window", "8000", "--json")
    )
    assert ctx["window"] == 8000 and ctx["window_source"]
    assert ctx["system"] > 0 and ctx["tools"] > 0  # what the agent really sends
    assert ctx["measured"] is False
    assert ctx["input"] == ctx["system"] + ctx["tools"] + ctx["history"] + ctx["reply_priming"]
    assert _run("--ledger", str(db), "context", "sess-1")  # the table renders


def test_unknown_session_is_a_coded_error(db: Path) -> None:
    result = runner.invoke(app, ["--ledger", str(db), "show", "nope", "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "USER_ERROR"


def _walk(group: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    import typer.main

    click_group = typer.main.get_command(app) if not prefix else group
    names: list[tuple[str, ...]] = []
    for name, cmd in getattr(click_group, "commands", {}).items():
        names.append((*prefix, name))
        if hasattr(cmd, "commands"):
            names.extend(_walk(cmd, (*prefix, name)))
    return names


def test_every_command_has_help_with_an_example() -> None:
    commands = _walk(app)
    assert {("import",), ("sessions",), ("show",), ("context",), ("export",), ("verify",)} <= set(
        commands
    )
    for path in commands:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, path
        if path != ("bench",):
            assert "Example:" in result.stdout, f"{' '.join(path)} lacks an example"
