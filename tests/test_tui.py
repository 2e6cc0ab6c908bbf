"""The TUI driven headless through textual's pilot: a prompt, an approval, /context."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from comal.agent import Agent, AgentSettings, start_session
from comal.ledger import open_ledger
from comal.ops import Actor, Approver, House, Policy, Workspace, default_registry, receipts
from comal.testing import ScriptedProvider
from comal.tui import ApprovalScreen, ComalApp, TuiSession


def _script() -> list[dict[str, object]]:
    write = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Write",
        "input": {"path": "notes.txt", "content": "approved by a human\n"},
    }
    done = {"type": "text", "text": "Done: notes.txt written."}
    return [
        {"content": [write], "stop_reason": "tool_use", "usage": {"input_tokens": 50}},
        {"content": [done], "stop_reason": "end_turn", "usage": {"input_tokens": 80}},
    ]


def test_prompt_approval_and_context(tmp_path: Path) -> None:
    # covers: OPS-2, LIM-7, RES-1
    led = open_ledger(tmp_path / "tui.db")
    scope = start_session(led, "local", "tui", title="tui test")
    workspace = Workspace(tmp_path)
    policy = Policy.from_config({"mode": "ask"})
    provider = ScriptedProvider(_script())
    settings = AgentSettings.for_model("claude-sonnet-4-6", context_window=32_000)

    def make_agent(approver: Approver, say: object) -> Agent:
        house = House(
            led, scope, default_registry(), policy, workspace=workspace, approver=approver
        )
        return Agent(led, scope, provider, house, settings, actor=Actor.user("ana"), say=say)  # type: ignore[arg-type]

    controls = House(led, scope, default_registry(), policy, workspace=workspace)
    session = TuiSession(led, scope, controls, make_agent, model="claude-sonnet-4-6", user="ana")
    app = ComalApp(session)
    lines: list[str] = []

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"write the notes", "enter")
            for _ in range(100):  # the agent runs in a worker; wait for its approval dialog
                await pilot.pause(0.05)
                if isinstance(app.screen, ApprovalScreen):
                    break
            assert isinstance(app.screen, ApprovalScreen)
            assert "Write" in app.screen.request.describe()
            await pilot.press("y")
            for _ in range(100):
                await pilot.pause(0.05)
                if not app.busy:
                    break
            assert not app.busy
            status = str(app.query_one("#status").render())
            assert status.startswith("ctx ") and "%" in status
            await pilot.press(*"/context", "enter")
            await pilot.pause(0.1)
            log = app.query_one("RichLog")
            lines.extend(str(line.text) for line in log.lines)  # type: ignore[attr-defined]

    asyncio.run(drive())
    assert (tmp_path / "notes.txt").read_text() == "approved by a human\n"
    rec = [r for r in receipts(led, scope) if r.operation == "Write"]
    assert rec and rec[0].status == "ok"
    body = json.dumps(led.records(scope, "receipt")[0].body)
    assert "ana" in body  # the approval is recorded with the human actor
    assert any("Done: notes.txt written." in line for line in lines)
    assert any('"window"' in line for line in lines)  # /context printed the budget
    provider.assert_complete()
    led.close()
