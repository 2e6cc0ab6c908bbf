"""``comal tools``, ``comal receipts`` and ``comal reconcile`` (OPS-1, OPS-3, OPS-6, RES-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from _ops_support import call, make_setup, on_cli, propose
from comal.cli._common import STATE
from comal.cli._ops import app

runner = CliRunner()


def use_ledger(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    # The root app's --ledger option sets this; other CLI tests may have left it set.
    monkeypatch.setattr(STATE, "ledger_path", path)


def run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_tools_json_prints_the_exact_catalog() -> None:
    # covers: OPS-1, OPS-6
    from comal.agent._catalog import agent_catalog, session_registry
    from comal.context import get_engine

    text = run("tools", "--surface", "model", "--format", "anthropic", "--json")
    # What an agent session offers its model (no model configured: no deferral planned).
    expected = agent_catalog(session_registry(), get_engine("limit")).json("anthropic")
    assert text == expected + "\n"
    tools = json.loads(text)
    assert all(set(t) == {"name", "description", "input_schema"} for t in tools)
    assert "mode" not in {t["name"] for t in tools}
    tui = json.loads(run("tools", "--surface", "tui", "--format", "openai", "--json"))
    assert "mode" in {t["function"]["name"] for t in tui}
    assert "catalog sha256" in run("tools")


def test_receipts_json_one_object_per_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: OPS-3, OPS-5
    s = make_setup(tmp_path, session="sess-ops")
    propose(s, call("Write", {"path": "a.txt", "content": "hi\n"}))
    propose(s, call("mode", {"mode": "trusted"}))
    on_cli(s, call("Bash", {"command": "echo hi"}))
    s.close()
    use_ledger(monkeypatch, tmp_path / "ledger.db")
    rows = json.loads(run("receipts", "sess-o", "--json"))
    assert [r["operation"] for r in rows] == ["Write", "mode", "Bash"]
    write, mode, bash = rows
    assert write["actor"] == {"kind": "user", "id": "ana"}
    assert write["judgment"]["rule"] == "mode:trusted" and write["status"] == "ok"
    assert write["observations"]["digest_after"] == write["observations"]["intended_digest"]
    assert write["output"]["sha256"] and write["disposition"] == "serve"
    assert (mode["status"], mode["judgment"]["rule"]) == ("denied", "audience:human")
    assert bash["observations"]["effects"] == "unknown" and bash["surface"] == "cli"
    assert "audience:human" in run("receipts", "sess-ops")


def test_reconcile_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # covers: RES-3
    s = make_setup(tmp_path, session="sess-rec")
    s.close()
    use_ledger(monkeypatch, tmp_path / "ledger.db")
    out = json.loads(run("reconcile", "sess-rec", "--workspace", str(s.root), "--json"))
    assert out == {"reconciled": [], "pending": []}
    result = runner.invoke(app, ["receipts", "nope", "--json"])
    assert result.exit_code == 2 and json.loads(result.stdout)["error"]["code"] == "USER_ERROR"


def test_every_ops_command_has_help_with_an_example() -> None:
    # covers: CFG-1
    group = get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert names == ["call", "receipts", "reconcile", "tools"]
    for name in names:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Example:" in result.stdout, name
