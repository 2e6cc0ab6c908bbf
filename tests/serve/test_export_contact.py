"""What the proxy recorded exports back as it came (issue 19, INT-2), and a coded error never
leaves a command as a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from comal.cli import app
from comal.errors import UserError
from comal.ledger import open_ledger
from comal.messages import Message, Role, Text

from ._support import proxy

runner = CliRunner()

# Claude Code 2.1.x puts its agent-type list in a system message inside the conversation. The
# content is kept in the wire's normal form (a string, or a list of several text blocks).
AGENTS = {"role": "system", "content": "Available agent types: Explore, Plan"}
NOTE = {
    "role": "system",
    "content": [
        {"type": "text", "text": "The user switched to plan mode."},
        {"type": "text", "text": "Do not edit files."},
    ],
}


def _export(db: Path, session: str, *extra: str) -> Any:
    result = runner.invoke(app, ["--ledger", str(db), "export", session, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_system_message_inside_the_conversation_exports_where_it_came(tmp_path: Path) -> None:
    # covers: INT-2, LED-1
    script = [{"content": "Hello."}, {"content": "Planned."}]
    with proxy(tmp_path, script) as px:
        client = px.anthropic()
        first: list[Any] = [{"role": "user", "content": "hi"}]
        # As Claude Code sends it: the beta route.
        settings: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 100}
        settings |= {"system": "You are Claude Code.", "extra_query": {"beta": "true"}}
        reply = client.messages.create(messages=first, **settings)
        assert reply.content[0].text == "Hello."  # type: ignore[union-attr]
        sent = [
            *first,
            {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
            AGENTS,
            {"role": "user", "content": "plan the change"},
            NOTE,
        ]
        client.messages.create(messages=sent, **settings)
        assert px.fake.requests[-1].path == "/v1/messages?beta=true"
        assert px.fake.requests[-1].body["messages"] == sent  # upstream as the client sent it
        (info,) = px.ledger.sessions()
        roles = [e.role for e in px.ledger.entries(info.scope)]
    assert roles == ["user", "assistant", "system", "user", "system", "assistant"]
    db = tmp_path / "ledger.db"
    exported = _export(db, info.id, "--format", "anthropic", "--json")
    answer = {"role": "assistant", "content": [{"type": "text", "text": "Planned."}]}
    assert exported["messages"] == [*sent, answer]
    # Without --format, a recorded session exports in the format it came in.
    assert _export(db, info.id, "--json") == exported
    from comal.messages.wire import from_anthropic

    with open_ledger(db) as led:
        stored = [e.message for e in led.entries(info.scope)]
    assert from_anthropic(exported, inline_system=True) == stored  # lossless both ways


def test_a_late_system_message_of_an_imported_session_exports_too(tmp_path: Path) -> None:
    # covers: INT-2
    db = tmp_path / "l.db"
    with open_ledger(db) as led:
        scope = led.create_session("local", "importer", source="import")
        for message in (
            Message.system("be brief"),
            Message.user("hi"),
            Message(Role.SYSTEM, (Text("late"),)),
            Message.user("again"),
        ):
            led.append(scope, [message])
    exported = _export(db, scope.session, "--format", "anthropic", "--json")
    assert exported == {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "late"},
            {"role": "user", "content": "again"},
        ]
    }


def test_a_coded_error_after_a_commands_ledger_block_is_still_coded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: CFG-1
    db = tmp_path / "l.db"
    with open_ledger(db) as led:
        scope = led.create_session("local", "a")
        led.append(scope, [Message.user("hi")])

    def refuse(*args: Any) -> str:
        raise UserError("this session cannot be written as Markdown; try --format openai")

    monkeypatch.setattr("comal.cli._export.markdown", refuse)
    for extra in ([], ["--json"]):
        result = runner.invoke(
            app, ["--ledger", str(db), "export", scope.session, "-f", "markdown", *extra]
        )
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "USER_ERROR" in result.output and "Traceback" not in result.output
    assert json.loads(result.stdout)["error"]["code"] == "USER_ERROR"


def _commands(typer_app: typer.Typer) -> list[Any]:
    found = list(typer_app.registered_commands)
    for group in typer_app.registered_groups:
        assert group.typer_instance is not None
        found += _commands(group.typer_instance)
    return found


def test_every_command_turns_coded_errors_into_exit_2() -> None:
    # covers: CFG-1
    from comal.cli import build_app

    commands = _commands(build_app())
    assert len(commands) > 20
    unguarded = [c.callback for c in commands if not getattr(c.callback, "_coded", False)]
    assert unguarded == []
