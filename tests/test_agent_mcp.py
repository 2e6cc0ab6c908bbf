"""MCP servers from the operator's configuration (``mcp_servers``): the runtime starts them in
the house's OS sandbox, their tools reach the model through the one registry and are judged and
receipted like native ones, ``comal context`` counts them, and they stop with the runtime."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.agent import Config, Flags, Runtime
from comal.cli import app
from comal.errors import InputError
from comal.ledger import open_ledger
from comal.ops import sandbox_status
from comal.ops._policy import SandboxPolicy
from comal.providers import ModelRequest
from comal.testing import FunctionProvider

# covers: OPS-1, OPS-5, CFG-2

SERVER = Path(__file__).parent / "_ops_mcp_server.py"
MODEL = "anthropic:claude-sonnet-4-6"
runner = CliRunner()


def _server(notes: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"OPS_MCP_NOTES": str(notes)},
        # The sandbox's /tmp is private: a checkout under /tmp must stay readable to it.
        "readable_paths": [sys.prefix, sys.base_prefix, str(SERVER.parent)],
        "effects": {"echo": ["none"]},
    } | extra


def _tool_names(request: ModelRequest) -> list[str]:
    return [str(t["name"]) for t in request.tools]


def test_a_configured_server_runs_sandboxed_and_its_tools_are_judged(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = Config(mcp_servers={"t": _server(ws / "notes.txt")}, mode="trusted")

    def model(request: ModelRequest) -> dict[str, Any]:
        if len(provider.calls) == 1:
            call = {"type": "tool_use", "id": "m1", "name": "mcp__t__echo",
                    "input": {"text": "hi", "times": 2}}  # fmt: skip
            return {"content": [call]}
        return {"content": [{"type": "text", "text": "done"}]}

    provider = FunctionProvider(model)
    led = open_ledger(tmp_path / "l.db")
    rt = Runtime.open(led, Flags(model=MODEL, workspace=ws), config=config, provider=provider)
    with rt.closing():
        result = rt.run("echo twice")
        assert result.status == "finished", result.error
        assert "mcp__t__echo" in _tool_names(provider.calls[0])
        scope = rt.need_scope()
        receipts = [r for r in led.records(scope, "receipt") if r.kind == "mcp__t__echo"]
        assert [r.body["status"] for r in receipts] == ["ok"]
        assert "hihi" in led.entries(scope)[-2].message.tool_result.text  # type: ignore[union-attr]
        (event,) = led.records(scope, "event", kinds=["mcp_started"])
        assert event.body["server"] == "t" and "echo" in event.body["tools"]
        boxed = sandbox_status(SandboxPolicy()).active
        assert event.body["sandbox"]["active"] is boxed
        if boxed:
            assert event.body["sandbox"]["network"] is False
        running = list(rt.mcp.running)
        assert running and running[0].sandboxed is boxed
    assert rt.mcp.running == []  # closed with the runtime
    led.close()


def test_comal_context_counts_the_servers_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "l.db"
    led = open_ledger(db)
    scope = led.create_session("local", "comal", meta={"workspace": str(ws), "model": MODEL})
    led.close()
    base = runner.invoke(app, ["--ledger", str(db), "context", scope.session, "--json"])
    assert base.exit_code == 0, base.output
    cfg = tmp_path / "comal.json"
    cfg.write_text(json.dumps({"mcp_servers": {"t": _server(ws / "notes.txt")}}))
    monkeypatch.setenv("COMAL_CONFIG", str(cfg))
    more = runner.invoke(app, ["--ledger", str(db), "context", scope.session, "--json"])
    assert more.exit_code == 0, more.output
    assert json.loads(more.stdout)["tools"] > json.loads(base.stdout)["tools"]


def test_a_server_that_cannot_start_is_a_coded_event_and_the_run_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    broken = _server(ws / "n", args=[str(tmp_path / "no-such-server.py")])
    config = Config(mcp_servers={"gone": broken}, mode="trusted")
    provider = FunctionProvider(lambda r: {"content": [{"type": "text", "text": "done"}]})
    said: list[tuple[str, str]] = []
    led = open_ledger(tmp_path / "l.db")
    rt = Runtime.open(led, Flags(model=MODEL, workspace=ws), config=config, provider=provider)
    with rt.closing():
        result = rt.run("hello", say=lambda kind, text: said.append((kind, text)))
        assert result.status == "finished", result.error
        (event,) = led.records(rt.need_scope(), "event", kinds=["mcp_started"])
    assert event.body["error"]["code"] == "MCP_SERVER" and event.body["tools"] == []
    assert "gone" in event.body["error"]["message"] and event.body["log"].endswith("gone.log")
    assert "goes on without it" in event.body["notice"] and "gone.log" in event.body["notice"]
    assert [kind for kind, text in said if "'gone'" in text] == ["warn"]
    assert not any(name.startswith("mcp__gone") for name in _tool_names(provider.calls[0]))
    led.close()


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"t": {"command": "x", "network": "yes"}}, "mcp_servers.t.network"),
        ({"t": {"command": "x", "shell": True}}, "mcp_servers.t.shell"),
        ({"bad name": {"command": "x"}}, "mcp_servers"),
    ],
)
def test_server_settings_are_validated_with_their_key(
    tmp_path: Path, entry: dict[str, Any], key: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mcp_servers": entry}))
    refused = runner.invoke(app, ["config", "check", str(bad), "--json"])
    assert refused.exit_code == 2, refused.output
    message = json.loads(refused.stdout)["error"]["message"]
    assert str(bad) in message and key in message
    with pytest.raises((InputError, ValueError)):
        Config.model_validate({"mcp_servers": entry})
