"""What the TUI tests share: waiting, through Textual's pilot, for the app to get somewhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


async def until(pilot: Any, test: Callable[[], object], tries: int = 200) -> None:
    """Pause the pilot until ``test()`` holds; the agent runs in a worker thread, so the app gets
    there between pauses, never at once."""
    for _ in range(tries):
        await pilot.pause(0.05)
        if test():
            return
    raise AssertionError("the TUI did not get there")
