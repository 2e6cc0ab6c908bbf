"""Opening the TUI on a new or resumed session (``comal`` / ``comal --resume UUID`` / ``-c``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from ..agent import Flags
from ..errors import ComalError
from ..safe_text import safe
from ._common import err, ledger, said


def run_tui(flags: Flags, *, resume: str | None, latest: bool = False) -> int:
    """Open the TUI; returns the exit code. A new session starts with its first prompt; the
    session lock is held while the agent runs."""
    from ..agent import Runtime
    from ..tui import ComalApp

    try:
        with ledger(create=True) as led:
            runtime = Runtime.open(led, flags, resume=resume, latest=latest)
            with runtime.closing():
                ComalApp(runtime).run()
    except ComalError as exc:
        err.print(f"[bold red]error[/] {escape(f'[{exc.code}] {safe(said(exc))}')}")
        return 2
    return 0
