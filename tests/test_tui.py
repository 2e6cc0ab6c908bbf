"""The TUI driven headless through textual's pilot, on the one agent factory (Runtime)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Collapsible, Static

from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.ledger import open_ledger
from comal.ops import receipts
from comal.providers import ModelRequest
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tui import ApprovalScreen, ComalApp


def _write(call_id: str, path: str, text: str) -> dict[str, object]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "Write",
        "input": {"path": path, "content": text},
    }


def _script() -> list[dict[str, object]]:
    done = {"type": "text", "text": "Done: notes.txt written."}
    return [
        {
            "content": [_write("toolu_1", "notes.txt", "approved by a human\n")],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 50},
        },
        {"content": [done], "stop_reason": "end_turn", "usage": {"input_tokens": 80}},
        {
            "content": [_write("toolu_2", "notes.txt", "v2\n")],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 90},
        },
        {
            "content": [_write("toolu_3", "notes.txt", "v3\n")],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 95},
        },
        {"content": [{"type": "text", "text": "v3"}], "stop_reason": "end_turn"},
    ]


def _texts(app: ComalApp) -> list[str]:
    return [str(w.render()) for w in app.query(Static)]


@pytest.fixture
def runtime(tmp_path: Path) -> Any:
    led = open_ledger(tmp_path / "tui.db")
    provider = ScriptedProvider(_script())
    config = Config(mode="ask", agent="tui")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=config, provider=provider)
    rt.user = "ana"
    yield rt, provider
    led.close()


def test_prompt_approval_context_and_always_allow(runtime: Any, tmp_path: Path) -> None:
    # covers: OPS-1, OPS-2, LIM-7
    rt, provider = runtime
    app = ComalApp(rt)

    async def drive() -> None:
        async with app.run_test() as pilot:
            assert "new session" in str(app.query_one("#status").render())
            await pilot.click("Input")
            await pilot.press(*"write the notes", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            assert "Write" in app.screen.request.describe()
            await pilot.press("y")
            await _until(pilot, lambda: not app.busy)
            status = str(app.query_one("#status").render())
            assert status.startswith("ctx ") and "%" in status and "limit" in status
            assert app.query(Collapsible)  # the tool output is shown, collapsed
            await pilot.press(*"/context", "enter")
            await pilot.press(*"/help", "enter")
            await pilot.pause(0.2)
            # The second prompt: "always" adds a rule, so the third write is not asked about.
            await pilot.press(*"again", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            await pilot.press("a")
            await _until(pilot, lambda: not app.busy)
            seen.extend(_texts(app))

    seen: list[str] = []
    asyncio.run(drive())
    led, scope = rt.ledger, rt.scope
    assert scope is not None
    assert (tmp_path / "notes.txt").read_text() == "v3\n"
    writes = [r for r in receipts(led, scope) if r.operation == "Write"]
    assert [r.status for r in writes] == ["ok", "ok", "ok"]
    third = json.dumps(led.records(scope, "receipt")[-1].body)
    assert "Write(notes.txt)" in third  # allowed by the rule "always" added, not asked
    added = led.records(scope, "event", kinds=("rule_added",))
    assert added and added[0].body["by"] == "ana"
    body = json.dumps(led.records(scope, "receipt")[0].body)
    assert "ana" in body  # the approval is recorded with the human actor
    shown = "\n".join(seen)
    assert "Done: notes.txt written." in shown
    assert "/compact" in shown  # /help lists the human operations
    context = [r for r in receipts(led, scope) if r.operation == "context"]
    assert context and context[0].surface == "tui"  # /context went through the house
    provider.assert_complete()


def test_model_control_reaches_the_next_turn(runtime: Any) -> None:
    # covers: OPS-6
    rt, _ = runtime
    rt.start("hello")
    outcome = rt.control("model", {"model": "openai:gpt-4o"}, surface="tui")
    assert not outcome.result.is_error
    assert rt.settings().model == "gpt-4o"
    proposer = rt.proposer()
    assert proposer.settings.model == "gpt-4o"


def test_hostile_text_is_escaped_on_screen(runtime: Any) -> None:
    rt, _ = runtime
    rt.start("clear \x1b[2J the screen \u202eevil")
    app = ComalApp(rt)
    seen: list[str] = []

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.pause(0.1)
            seen.extend(_texts(app))

    asyncio.run(drive())
    shown = "\n".join(seen)
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "\\x1b[2J" in shown and "\\u202e" in shown


def test_escape_stops_a_model_call_in_flight_and_the_next_prompt_continues(
    tmp_path: Path,
) -> None:
    # covers: SRF-2, DRV-2
    # The model's first reply is held until after Escape: the run does not wait for it. What it
    # would have proposed (a Read) never runs, and the next request tells the model the run was
    # interrupted while it answered.
    pressed = threading.Event()

    def model(req: ModelRequest) -> dict[str, Any]:
        if len(provider.calls) == 1:
            assert pressed.wait(30), "Escape never reached the app"
            read = {"type": "tool_use", "id": "toolu_r", "name": "Read",
                    "input": {"path": "notes.txt"}}  # fmt: skip
            return {"content": [read], "stop_reason": "tool_use"}
        return {"content": [{"type": "text", "text": "read it"}], "stop_reason": "end_turn"}

    provider = FunctionProvider(model)
    (tmp_path / "notes.txt").write_text("hello\n")
    led = open_ledger(tmp_path / "tui.db")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=Config(mode="trusted", agent="tui"), provider=provider)
    app = ComalApp(rt)

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.click("Input")
            await pilot.press(*"read the notes", "enter")
            await _until(pilot, lambda: len(provider.calls) == 1)
            await pilot.press("escape")
            # The run ends while the model call is still held (it is released only after).
            await _until(pilot, lambda: not app.busy)
            pressed.set()
            seen.extend(_texts(app))
            assert len(provider.calls) == 1
            await pilot.press(*"go on", "enter")
            await _until(pilot, lambda: not app.busy)

    seen: list[str] = []
    try:
        asyncio.run(drive())
        shown = "\n".join(seen)
        assert "interrupting" in shown and "[INTERRUPTED]" in shown
        assert rt.scope is not None
        assert not [r for r in receipts(led, rt.scope) if r.operation == "Read"]
        assert len(provider.calls) == 2  # the next prompt continued the same session
        told = "\n".join(m.text for m in provider.calls[1].messages)
        assert "interrupted the run while the model was answering" in told
        requests = [r for r in led.requests(rt.scope) if r.meta.get("error") == "INTERRUPTED"]
        assert len(requests) == 1  # the abandoned call is recorded, its usage unknown
        assert led.session(rt.scope).status == "finished"
    finally:
        pressed.set()
        rt.close()
        led.close()
