"""The TUI's small things from a first day with it (issue 32, item 11), through textual's pilot
on the one agent factory: the status line says the mode and the gauge once, /mode and /effort
alone say what they are and may be, a control changed from its default says "default", and
/compact never grows a small context."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from textual.widgets import Static

from _tui_support import until as _until
from comal.agent import Config, Flags, Runtime
from comal.ledger import open_ledger
from comal.testing import ScriptedProvider
from comal.tui import ApprovalScreen, ComalApp

_WRITE = {
    "type": "tool_use",
    "id": "w1",
    "name": "Write",
    "input": {"path": "a.txt", "content": "x"},
}
_SCRIPT = [
    {"content": [_WRITE], "stop_reason": "tool_use", "usage": {"input_tokens": 50}},
    {"content": [{"type": "text", "text": "Written."}], "stop_reason": "end_turn"},
]


def _texts(app: ComalApp) -> list[str]:
    return [str(w.render()) for w in app.query("#transcript Static").results(Static)]


def _runtime(tmp_path: Path) -> Runtime:
    led = open_ledger(tmp_path / "tui.db")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=Config(mode="ask"), provider=ScriptedProvider(_SCRIPT))
    rt.user = "ana"
    return rt


def _drive(rt: Runtime, commands: tuple[str, ...]) -> dict[str, Any]:
    """A prompt whose Write is approved, then ``commands``; the status line as it went."""
    app = ComalApp(rt)
    seen: dict[str, Any] = {}

    async def drive() -> None:
        async with app.run_test() as pilot:
            status = lambda: str(app.query_one("#status").render())  # noqa: E731
            await pilot.click("Input")
            await pilot.press(*"write a", "enter")
            await _until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
            seen["working"] = status()  # mid-turn: the turn's note does not repeat the gauge
            await pilot.press("y")
            await _until(pilot, lambda: not app.busy)
            seen["ready"] = status()
            for command in commands:
                await pilot.press(*command, "enter")
                await pilot.pause(0.2)
            seen["after"] = status()
            seen["texts"] = "\n".join(_texts(app))

    asyncio.run(drive())
    return seen


def test_the_status_line_and_the_controls_say_what_is_true(tmp_path: Path) -> None:
    # covers: OPS-6, DRV-4
    rt = _runtime(tmp_path)
    try:
        seen = _drive(rt, ("/mode", "/effort", "/effort high"))
    finally:
        rt.close()
        rt.ledger.close()
    for name in ("working", "ready"):
        line = seen[name]
        assert line.count("ctx") == 1 and "mode ask" in line, (name, line)
        assert line.count("claude-sonnet-4-6") == 1, (name, line)
    assert "working… turn 1" in seen["working"], seen["working"]
    assert "effort high" in seen["after"], seen["after"]
    said = seen["texts"]
    assert "mode: ask; choices: read-only, ask, trusted" in said, said
    assert "effort: default (the provider's); choices: low, medium, high" in said, said
    assert "effort: default -> high" in said and "None" not in said, said


def test_compact_never_grows_a_small_context(tmp_path: Path) -> None:
    # covers: LIM-7
    rt = _runtime(tmp_path)
    try:
        assert rt.scope is None
        seen = _drive(rt, ("/compact",))
        assert rt.scope is not None
        checkpoints = rt.ledger.checkpoints(rt.scope)
    finally:
        rt.close()
        rt.ledger.close()
    # A two-step session is smaller than any checkpoint of it: /compact stores none.
    assert "nothing to compact" in seen["texts"] and checkpoints == [], seen["texts"]


def test_a_crashed_session_opens_saying_so_and_naming_the_call_left_open(tmp_path: Path) -> None:
    # covers: DRV-4, RES-1
    from comal.messages import Message, ToolCall

    led = open_ledger(tmp_path / "tui.db")
    config = Config(mode="ask")
    scope = led.create_session(config.tenant, config.agent, messages=[Message.user("sleep")])
    # A run died while its Bash ran: the call has no result and no run recorded its end.
    call = ToolCall("b2", "Bash", '{"command": "sleep 20"}')
    led.append(scope, [Message.assistant("Sleeping.", call)])
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(
        led, flags, resume=scope.session, config=config, provider=ScriptedProvider(_SCRIPT)
    )
    app = ComalApp(rt)
    texts: list[str] = []

    async def drive() -> None:
        async with app.run_test() as pilot:
            await pilot.pause(0.2)
            texts.extend(_texts(app))

    asyncio.run(drive())
    shown = "\n".join(texts)
    assert f"session {scope.session} (crashed)" in shown, shown  # not the stored "active"
    assert "Bash b2: no result (the session stopped while it ran)" in shown, shown
