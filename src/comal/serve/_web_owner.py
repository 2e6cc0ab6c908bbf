"""Who runs a web session: the worker that holds the session's lock (SRF-1, SCL-1).

``comal serve --workers N`` runs N processes, and several ``comal serve`` may share one
PostgreSQL ledger, each taking any request of any session. What decides who runs a session
is never one process's memory but the session's lock (``session_lock``: a file lock beside an
SQLite ledger, an advisory lock and a lease row in a PostgreSQL one), which exactly one
process holds: the one whose worker thread runs the agent (``Runtime.run``), or one doing a
short operation that must not race a run (a ``/mode`` while nothing runs). A process that
takes the lock knows no other runs the session, so approvals still pending were asked by a
worker that is gone: it answers them "refused" then, and only then.

While it holds the lock a worker answers the session's inbox (:mod:`._web_inbox`): the
requests other workers left for it, run as the same human operations, their outcomes written
back. It looks every tenth of a second while its agent runs, and once more before it lets the
lock go, so a request is never left for a holder that is gone. A worker that finds the lock
free while it waits for an answer takes the lock itself and answers its own request.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..ledger import LedgerBackend, PgSessionLock, Scope, SessionLock
from ._web_inbox import Command, commands, finish, take

__all__ = ["POLL_S", "Hold", "worker_name"]

log = logging.getLogger("comal.serve")

POLL_S = 0.1


def worker_name() -> str:
    """This process, as inbox records name who took or answered a request."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Hold:
    """This worker holds a session's lock: it runs the session's agent, answers its inbox with
    ``answer(command)``, and lets the lock go with :meth:`release`."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        lock: SessionLock | PgSessionLock,
        answer: Callable[[Command], dict[str, Any]],
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.lock = lock
        self._answer = answer
        self._me = worker_name()
        self._seen = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._released = False

    def drain(self, *, new_only: bool = False) -> None:
        """Answer the requests waiting in the inbox (``new_only``: those recorded after the
        last one this hold saw; the last drain before release reads them all)."""
        for command in commands(self.ledger, self.scope, after=self._seen if new_only else 0):
            self._seen = max(self._seen, command.record)
            if take(self.ledger, self.scope, command.id, self._me):
                finish(self.ledger, self.scope, command.id, self._answer(command), self._me)

    def watch(self, tick: Callable[[], None] | None = None) -> None:
        """Answer the inbox as requests come, on a thread of its own, until :meth:`release`;
        ``tick()`` runs at each look (the run's streamed text is written out)."""

        def loop() -> None:
            while not self._stop.wait(POLL_S):
                try:
                    self.drain(new_only=True)
                    if tick is not None:
                        tick()
                except Exception:  # the ledger away: look again at the next tick
                    log.exception("web session %s: the inbox was not read", self.scope.session)

        name = f"comal-inbox-{self.scope.session[:8]}"
        self._thread = threading.Thread(target=loop, name=name, daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop watching, answer what is left, then let the lock go (whatever that raised)."""
        if self._released:
            return
        self._released = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self.drain()
        finally:
            self.lock.release()
