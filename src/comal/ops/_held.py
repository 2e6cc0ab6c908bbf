"""Which sessions this process holds the lock of, and the house's default guard (issue 30).

One writer per session (RES-2): two houses that append to one session at once interleave its
steps — one's assistant step lands between the other's call and its result — and ``verify``
finds the steps split. The agent's runtime guards its houses with its own lock; a house built
any other way (``House(...)``, ``HouseFactory(...).house(scope)``, :func:`comal.agent.
house_factory` without a guard) gets :class:`SessionGuard` for its session: a call with effects
runs only while this process holds that session's lock, taken with
:func:`comal.agent.lock_session` (which notes it here) before or after the house was built. A
child session's house keeps its parent's guard, so it runs under the parent's lock.

:func:`unguarded` is the explicit opt-out — a test, or a program that is the only writer of a
session it cannot lock (an in-memory ledger) — and its name says what it gives up.

The registry is the process's: threads of one process share the locks it holds, as they
share its ledger connections; the lock keeps other processes (and other locks taken in this
one) out, not other threads that skip it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Protocol

from ._errors import SessionNotHeld

__all__ = ["HeldLock", "SessionGuard", "holds_session", "note_held", "unguarded"]


class HeldLock(Protocol):
    """A session lock as both ledgers hand one out (``SessionLock``, ``PgSessionLock``)."""

    session: str

    @property
    def held(self) -> bool: ...


_mutex = threading.Lock()
_locks: dict[str, list[weakref.ref[HeldLock]]] = {}


def note_held(lock: HeldLock) -> None:
    """Remember ``lock`` (taken by this process) for as long as it is held."""
    with _mutex:
        refs = [r for r in _locks.get(lock.session, ()) if r() is not None]
        _locks[lock.session] = [*refs, weakref.ref(lock)]


def _live(lock: HeldLock | None) -> bool:
    # A PostgreSQL lock whose heartbeat found its lease gone is held no more.
    return lock is not None and lock.held and not getattr(lock, "lost", False)


def holds_session(session: str) -> bool:
    """Whether this process holds ``session``'s lock now (one noted by :func:`note_held`)."""
    with _mutex:
        refs = [r for r in _locks.get(session, ()) if _live(r())]
        if refs:
            _locks[session] = refs
        else:
            _locks.pop(session, None)
        return bool(refs)


@dataclass(frozen=True, slots=True)
class SessionGuard:
    """The default guard of a house: calls with effects run only while this process holds
    ``session``'s lock (:func:`comal.agent.lock_session`)."""

    session: str

    def __call__(self) -> None:
        if not holds_session(self.session):
            raise SessionNotHeld(
                f"session {self.session}: a call with effects needs the session's lock, and "
                "this process does not hold it, so another writer could split its steps; take "
                "it around the run with comal.agent.lock_session(ledger, scope), or run the "
                "agent through comal.agent.Runtime"
            )


def unguarded() -> None:
    """A guard that lets everything run: the caller promises no other writer appends to the
    session while its house works (a test; a single-threaded program on an in-memory
    ledger). With two writers, their steps split."""
