"""The TUI while the agent works, driven through textual's pilot (DRV-2, DRV-3): Escape stops a
running command now, its output streamed until then and kept, the model told on the next
turn; Enter steers (the message goes in after the running call), Tab queues (after the run);
both are shown as queued until the agent takes them.

No wall-clock assertion: the commands wait for a file the test writes, or for thirty seconds
that the bounded waits below (a few seconds) would never see the end of.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Static

from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.agent._queue import pending
from comal.ledger import open_ledger
from comal.messages import Role
from comal.ops import receipts, sandbox_status
from comal.providers import ModelRequest
from comal.testing import ScriptedProvider
from comal.tui import ComalApp

pytestmark = pytest.mark.skipif(
    not sandbox_status().available,
    reason=f"Bash runs in the OS sandbox, not usable here: {sandbox_status().reason}",
)


def _bash(call_id: str, command: str) -> dict[str, Any]:
    bash = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
    return {"content": [bash], "stop_reason": "tool_use"}


def _say(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def _texts(app: ComalApp, selector: str = "Static") -> list[str]:
    return [str(w.render()) for w in app.query(selector).results(Static)]


def _shown(app: ComalApp, text: str, selector: str = "Static") -> bool:
    return any(text in t for t in _texts(app, selector))


def _user_texts(req: ModelRequest) -> list[str]:
    return [m.text for m in req.messages if m.role is Role.USER]


@pytest.fixture
def tui(tmp_path: Path) -> Any:
    def make(script: list[dict[str, Any]]) -> tuple[Runtime, ScriptedProvider]:
        led = open_ledger(tmp_path / "tui.db")
        provider = ScriptedProvider(script)
        flags = Flags(
            model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path
        )
        rt = Runtime.open(led, flags, config=Config(mode="trusted", agent="tui"), provider=provider)
        rt.user = "ana"
        made.append(rt)
        return rt, provider

    made: list[Runtime] = []
    yield make
    for rt in made:
        rt.close()
        rt.ledger.close()


def test_escape_stops_a_running_command_now_and_the_model_is_told(tui: Any) -> None:
    # covers: DRV-2, SRF-2
    rt, provider = tui(
        [
            _bash("toolu_s", "echo started; sleep 30; echo never"),
            _say("Understood: stopped."),
        ]
    )
    app = ComalApp(rt)

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"wait a while", "enter")
            # The command's first line is shown while it runs, before any result.
            await _until(pilot, lambda: _shown(app, "started", ".live"))
            assert app.busy
            await pilot.press("escape")
            await _until(pilot, lambda: not app.busy)  # seconds, not the thirty of the sleep
            assert not app.query(".live")  # the result replaced the live view
            seen.extend(_texts(app))
            await pilot.press(*"what happened?", "enter")
            await _until(pilot, lambda: not app.busy)

    seen: list[str] = []
    asyncio.run(drive())
    assert rt.scope is not None
    (bash,) = [r for r in receipts(rt.ledger, rt.scope) if r.operation == "Bash"]
    assert bash.status == "interrupted" and bash.observations["seconds"] < 30
    assert bash.observations["interrupted_by"] == "the user ana"
    assert "interrupting" in "\n".join(seen)
    # The next request carries the interrupted result, its output so far, and comal's word.
    (result,) = [m for m in provider.calls[1].messages if m.role is Role.TOOL]
    assert result.text.startswith("started\n") and "never" not in result.text
    assert "[interrupted by the user ana after " in result.text
    told = "\n".join(m.text for m in provider.calls[1].messages)
    assert "interrupted the run while Bash ran" in told
    assert _user_texts(provider.calls[1])[-1].endswith("what happened?")
    provider.assert_complete()


def test_enter_steers_and_tab_queues_while_the_agent_works(tui: Any, tmp_path: Path) -> None:
    # covers: DRV-3, SRF-2
    # The command waits for a file: while it runs the person sends one message with Enter
    # (it goes in after the command, before the next model call) and one with Tab (it waits
    # for the run to finish, then starts the next turn).
    rt, provider = tui(
        [
            _bash("toolu_w", "while [ ! -f go ]; do sleep 0.05; done; echo went"),
            _say("Noted, the docs too."),
            _say("And the changelog."),
        ]
    )
    app = ComalApp(rt)

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"start the work", "enter")
            await _until(pilot, lambda: rt.scope is not None and rt.active is not None)
            await _until(pilot, lambda: _shown(app, "Bash"))
            await pilot.press(*"also the docs", "enter")
            await pilot.press(*"then the changelog", "tab")
            await _until(pilot, lambda: len(app.query("#queued Static")) == 2)
            queued = _texts(app, "#queued Static")
            assert "after the running call" in queued[0] and "also the docs" in queued[0]
            assert "after this run" in queued[1] and "then the changelog" in queued[1]
            assert app.query_one(Input).value == ""
            assert rt.scope is not None
            assert [q.mode for q in pending(rt.ledger, rt.scope)] == ["steer", "queue"]
            (tmp_path / "go").write_text("")
            await _until(pilot, lambda: not app.busy and len(provider.calls) == 3)
            assert not app.query("#queued Static")
            seen.extend(_texts(app, "#transcript Static"))

    seen: list[str] = []
    asyncio.run(drive())
    assert rt.scope is not None
    assert pending(rt.ledger, rt.scope) == []
    _, steered, queued = provider.calls
    # Steered: after the command's result, before the model's next call; not the queued one.
    last = steered.messages[-1]
    assert last.role is Role.USER and last.text.endswith("also the docs")
    assert steered.messages[-2].role is Role.TOOL and "went" in steered.messages[-2].text
    assert not any("changelog" in t for t in _user_texts(steered))
    # Queued: the next turn, once the run had finished.
    assert _user_texts(queued)[-1].endswith("then the changelog")
    assert queued.messages[-2].text == "Noted, the docs too."
    # Each went in once, named as the person's, through the TUI; shown as said once taken.
    delivered = rt.ledger.records(rt.scope, "event", kinds=("prompt_delivered",))
    assert len(delivered) == 2
    assert (
        "channel: tui" in "\n".join(_user_texts(steered))
        and "sender: ana" in steered.messages[-1].text
    )
    shown = "\n".join(seen)
    assert "you: also the docs" in shown and "you: then the changelog" in shown
    provider.assert_complete()


def test_escape_with_a_message_queued_stops_the_command_and_sends_it_now(tui: Any) -> None:
    # covers: DRV-2, DRV-3
    # Codex's Escape while a message waits: what runs is stopped, the message goes in at once
    # and the agent goes on with it in the same run.
    rt, provider = tui(
        [
            _bash("toolu_s", "echo started; sleep 30; echo never"),
            _say("Switching to the docs."),
        ]
    )
    app = ComalApp(rt)

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"wait a while", "enter")
            await _until(pilot, lambda: _shown(app, "started", ".live"))
            await pilot.press(*"forget it, do the docs", "enter")
            await _until(pilot, lambda: len(app.query("#queued Static")) == 1)
            await pilot.press("escape")
            await _until(pilot, lambda: not app.busy and len(provider.calls) == 2)
            assert not app.query("#queued Static")

    asyncio.run(drive())
    assert rt.scope is not None
    (bash,) = [r for r in receipts(rt.ledger, rt.scope) if r.operation == "Bash"]
    assert bash.status == "interrupted" and bash.observations["seconds"] < 30
    sent = provider.calls[1].messages
    assert sent[-3].role is Role.TOOL and "[interrupted by the user ana after " in sent[-3].text
    assert "interrupted the run while Bash ran" in sent[-2].text
    assert sent[-1].text.endswith("forget it, do the docs")
    assert rt.ledger.session(rt.scope).status == "finished"  # type: ignore[union-attr]
    provider.assert_complete()
