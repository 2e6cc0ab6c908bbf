"""Stopping a running loop between calls, the same way on every surface that holds one.

A person asks (the TUI's Escape, the web page's ``interrupt`` operation); the loop stops at
its next safe phase: before a model call (``assembled``), after a call's receipt
(``recorded``), after the prompt is stored (``intended``). Never in the middle of a tool call
or between a call and its receipt, so what ran is recorded and the session resumes from the
ledger on the next prompt like any other.
"""

from __future__ import annotations

import threading

from ..errors import UserError
from ._propose import Probe

__all__ = ["STOPPABLE", "Interrupted", "Interrupter"]

STOPPABLE = frozenset({"assembled", "recorded", "intended"})


class Interrupted(UserError):
    code = "INTERRUPTED"


class Interrupter:
    """One run's stop flag, read by the loop's probe (:meth:`probe`)."""

    def __init__(self, session: str = "", then: Probe | None = None) -> None:
        self.session, self.then = session, then
        self._stop = threading.Event()

    def request(self) -> None:
        self._stop.set()

    def clear(self) -> None:
        self._stop.clear()

    def is_set(self) -> bool:
        return self._stop.is_set()

    def probe(self, phase: str, detail: str) -> None:
        if self.then is not None:
            self.then(phase, detail)
        if phase in STOPPABLE and self._stop.is_set():
            what = f"session {self.session}" if self.session else "the session"
            raise Interrupted(f"{what} was interrupted; send a prompt to continue it")
