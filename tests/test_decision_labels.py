"""A human's approval reads as one everywhere — "approved by user ana" — never as the mode that
asked them ("allow by mode:ask"): in receipts, ``comal show``, the TUI (issue 32 §5)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static
from typer.testing import CliRunner

from _ops_support import call, make_setup, propose
from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.cli._common import STATE
from comal.cli._ops import app as ops_app
from comal.cli._sessions import app as sessions_app
from comal.ledger import open_ledger
from comal.ops import Actor, CallbackApprover, Policy, receipts
from comal.testing import ScriptedProvider
from comal.tui import ApprovalScreen, ComalApp

runner = CliRunner()


def _cli(app: Any, *args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_receipts_and_show_say_who_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: DRV-5, OPS-2
    approver = CallbackApprover(lambda r: "yes" in r.arguments["command"], by=Actor.user("ana"))
    policy = Policy.from_config(
        {"mode": "ask", "allow": ["Bash(ls *)"], "sandbox": {"allow_unsandboxed": True}}
    )
    s = make_setup(tmp_path, policy=policy, approver=approver, session="sess-labels")
    _, approved = propose(s, call("Bash", {"command": "ls && echo yes"}, call_id="c1"))
    _, refused = propose(s, call("Bash", {"command": "ls && echo no"}, call_id="c2"))
    _, ruled = propose(s, call("Bash", {"command": "ls -a"}, call_id="c3"))
    s.close()
    monkeypatch.setattr(STATE, "ledger_path", tmp_path / "ledger.db")
    table = _cli(ops_app, "receipts", "sess-labels")
    assert "approved by user ana" in table and "refused by user ana" in table
    assert "by mode:ask" not in table
    assert approved.label == "approved by user ana" and refused.label == "refused by user ana"
    assert ruled.label == "allow by Bash(ls *)"
    # The rule that asked stays on record beside the human who answered, and the part.
    assert approved.judgment["rule"] == "mode:ask"
    assert approved.judgment["part"] == {"index": 2, "of": 2, "text": "echo yes"}
    rows = json.loads(_cli(ops_app, "receipts", "sess-labels", "--json"))
    assert [r["label"] for r in rows] == [
        "approved by user ana",
        "refused by user ana",
        "allow by Bash(ls *)",
    ]
    shown = _cli(sessions_app, "show", "sess-labels")
    assert "[approved by user ana] ← c1" in shown and "[refused by user ana] ← c2" in shown
    entries = json.loads(_cli(sessions_app, "show", "sess-labels", "--json"))
    labels = [e["judgment"]["label"] for e in entries if "judgment" in e]
    assert labels == ["approved by user ana", "refused by user ana", "allow by Bash(ls *)"]


def _bash(call_id: str, command: str) -> dict[str, object]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}


def _turn(*blocks: dict[str, object]) -> dict[str, object]:
    return {"content": list(blocks), "stop_reason": "tool_use", "usage": {"input_tokens": 50}}


def test_the_tui_says_who_approved_and_always_covers_the_compound(tmp_path: Path) -> None:
    # covers: DRV-5, OPS-2
    done = {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    provider = ScriptedProvider(
        [
            _turn(_bash("t1", "ls && touch one.txt")),
            done,
            _turn(_bash("t2", "ls && touch two.txt")),
            _turn(_bash("t3", "ls && touch two.txt")),
            done,
        ]
    )
    led = open_ledger(tmp_path / "tui.db")
    config = Config(mode="ask", agent="tui", allow=["Bash(ls *)"],
                    sandbox={"allow_unsandboxed": True})  # fmt: skip
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=config, provider=provider)
    rt.user = "ana"
    app = ComalApp(rt)
    asked: list[str] = []
    seen: list[str] = []

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"first", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            asked.append(app.screen.request.describe())
            await pilot.press("y")
            await _until(pilot, lambda: not app.busy)
            await pilot.press(*"again", "enter")  # "always": the same compound is not asked again
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            await pilot.press("a")
            await _until(pilot, lambda: not app.busy)
            seen.extend(str(w.render()) for w in app.query(Static))

    asyncio.run(drive())
    shown = "\n".join(seen)
    # The dialog says which part asked, and why.
    assert 'part 2 of 2, "touch one.txt", matches no allow rule' in asked[0]
    assert "Bash: ok (approved by user ana)" in shown
    assert "by mode:ask" not in shown
    assert "Bash: ok (allow by Bash(ls && touch two.txt))" in shown
    assert rt.scope is not None
    assert [r.status for r in receipts(led, rt.scope)][-3:] == ["ok", "ok", "ok"]
    assert (tmp_path / "one.txt").exists() and (tmp_path / "two.txt").exists()
    provider.assert_complete()
    led.close()
