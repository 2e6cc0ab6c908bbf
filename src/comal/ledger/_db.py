"""The one connection a ledger holds, and the only way a statement reaches it.

Every statement, the store's and a caller's inside :meth:`Db.atomic`, goes through
:meth:`Db.execute`: written with ``?`` placeholders and rewritten for the dialect, shown to the
tracers installed (:meth:`Db.trace`), then run. Transactions are explicit statements on a
connection in autocommit mode, on both backends: ``atomic()`` opens one (SQLite's
``BEGIN IMMEDIATE`` takes the write lock up front, so a concurrent writer waits instead of failing
half way through a step), a nested ``atomic()`` becomes a savepoint, and a statement outside any
commits on its own, so none can leave a transaction open that swallows the next ``atomic()``.
A driver error leaves as a coded :class:`~comal.errors.LedgerError`.

**A lost connection.** When the server went away (a PostgreSQL restart), the statement that
found it out fails (:class:`~comal.ledger.LedgerUnavailable`), and so does the transaction it
was in: nothing is retried behind the caller's back. The next use of the ledger opens a new
connection first (``reopen``), so a long-lived process (a ``comal serve`` worker) goes on once
the server is back instead of failing every request until it is restarted.

**Time bounds.** Within :meth:`Db.bounded`, every statement the thread runs is cut off by the
database itself once the deadline passes (SQLite's progress handler, PostgreSQL's
``statement_timeout``), and leaves as :class:`~comal.ledger.LedgerTimeout`. The bound is installed
while the thread holds the connection's lock and removed when it lets go, so another thread's
statements on the shared connection are never cut short by it.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from ._dialect import Dialect
from ._errors import LedgerTimeout

Params = Sequence[Any] | Mapping[str, Any]


class Gate(Protocol):
    """Writers' turn-taking around a whole write transaction (SQLite: ``_locks.WriterGate``)."""

    def enter(self) -> bool:
        """Wait for the turn; False when not taken (then :meth:`leave` is not called)."""

    def leave(self) -> None: ...


Tracer = Callable[[str, Params], None]


class Db:
    """A connection shared by threads under a re-entrant lock."""

    def __init__(self, raw: Any, dialect: Dialect, target: str) -> None:
        self.raw = raw
        self.dialect = dialect
        self.target = target
        self.lock = threading.RLock()
        self.depth = 0
        self._tracers: list[Tracer] = []
        # Taken around every outermost write transaction when set (see _locks.WriterGate).
        self.gate: Gate | None = None
        self._rewrite = dialect.placeholder != "?"  # every append runs through here
        self._local = threading.local()  # this thread's deadline (time.monotonic), if bounded
        self._armed: float | None = None  # the deadline installed on the connection (lock held)
        # Opens a connection set up as the first one was; None: a lost connection stays lost.
        self.reopen: Callable[[], Any] | None = None
        self._holds = 0  # how deeply this connection's lock is held (the owner thread's)

    def execute(self, sql: str, args: Params = ()) -> Any:
        if self._armed is not None and time.monotonic() > self._armed:
            # PostgreSQL's timeout counts per statement: the block's total is checked here.
            raise self.overdue()
        return self._send(sql, args)

    def _send(self, sql: str, args: Params = ()) -> Any:
        if self._rewrite:
            sql = self.dialect.q(sql)
        for tracer in self._tracers:
            tracer(sql, args)
        # Without parameters a driver takes the text as it is (PostgreSQL: several statements).
        return self.raw.execute(sql, args) if args else self.raw.execute(sql)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        sql = self.dialect.q(sql)
        for tracer in self._tracers:
            for r in rows:
                tracer(sql, r)
        self.raw.cursor().executemany(sql, rows)

    @contextmanager
    def trace(self, callback: Tracer) -> Iterator[None]:
        with self.lock:
            self._tracers.append(callback)
        try:
            yield
        finally:
            with self.lock:
                self._tracers.remove(callback)

    # -- time bounds ------------------------------------------------------------------------------
    @contextmanager
    def bounded(self, seconds: float) -> Iterator[None]:
        """Within: this thread's statements end by ``seconds`` from now (nested bounds keep the
        earliest deadline); past it, :class:`LedgerTimeout`."""
        if not isinstance(seconds, int | float) or math.isnan(seconds) or seconds < 0:
            raise ValueError(f"a time bound is a number of seconds >= 0, not {seconds!r}")
        previous: float | None = getattr(self._local, "deadline", None)
        deadline = time.monotonic() + seconds
        self._local.deadline = deadline if previous is None else min(previous, deadline)
        try:
            yield
        finally:
            self._local.deadline = previous

    def check_deadline(self) -> None:
        """Raise :class:`LedgerTimeout` when this thread's bound has passed (for work done in
        Python between statements, such as a regex over the rows read)."""
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise self.overdue()

    def overdue(self) -> LedgerTimeout:
        return LedgerTimeout(
            self.target,
            "the query ran past the time bound it was given",
            "narrow it (more specific words, a phrase, a smaller limit) and try again",
        )

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The connection's lock, with this thread's bound installed on the connection while it
        is held (once, however deeply the lock nests); a lost connection is replaced first."""
        with self.lock:
            if self._holds == 0 and self.reopen is not None and self.dialect.broken(self.raw):
                self.raw = self.reopen()  # a LedgerUnavailable while the server is still away
            self._holds += 1
            try:
                with self._bound():
                    yield
            finally:
                self._holds -= 1

    @contextmanager
    def _bound(self) -> Iterator[None]:
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is None or self._armed is not None:
            yield
            return
        if time.monotonic() > deadline:
            raise self.overdue()
        try:
            self.dialect.arm(self, deadline)
        except self.dialect.errors as exc:
            raise self.dialect.translate(exc, self.target, "bounding a query") from exc
        self._armed = deadline
        try:
            yield
        finally:
            self._armed = None
            self.dialect.disarm(self)

    @contextmanager
    def atomic(self) -> Iterator[Db]:
        """One write transaction; nested calls become savepoints (all or nothing together)."""
        with self._held():
            depth = self.depth
            gate = self.gate if depth == 0 else None
            gated = gate is not None and gate.enter()
            try:
                yield from self._transaction(depth)
            finally:
                if gated and gate is not None:
                    gate.leave()

    def _transaction(self, depth: int) -> Iterator[Db]:
        begin, end = (
            (self.dialect.begin, "COMMIT")
            if depth == 0
            else (f"SAVEPOINT sp{depth}", f"RELEASE sp{depth}")
        )
        try:
            self.execute(begin)
        except self.dialect.errors as exc:
            raise self.dialect.translate(exc, self.target, "starting a write") from exc
        self.depth += 1
        try:
            yield self
        except BaseException as exc:
            self._undo(depth)
            if isinstance(exc, self.dialect.errors):
                raise self.dialect.translate(exc, self.target, "writing") from exc
            raise
        finally:
            self.depth -= 1
        try:
            self._send(end)  # a transaction is ended whatever the time bound says
        except self.dialect.errors as exc:
            self._undo(depth)
            raise self.dialect.translate(exc, self.target, "committing") from exc

    def _undo(self, depth: int) -> None:
        # SQLite rolls back by itself after some errors (a full disk) and a broken PostgreSQL
        # connection cannot roll back at all: then there is nothing left to undo here.
        with contextlib.suppress(*self.dialect.errors):
            if depth > 0:
                self._send(f"ROLLBACK TO sp{depth}")
                self._send(f"RELEASE sp{depth}")
            elif self.dialect.in_transaction(self.raw):
                self._send("ROLLBACK")

    @contextmanager
    def reading(self) -> Iterator[Db]:
        """The connection for reads, under the lock; driver errors leave coded."""
        with self._held():
            try:
                yield self
            except self.dialect.errors as exc:
                raise self.dialect.translate(exc, self.target, "reading") from exc

    @contextmanager
    def lenient(self) -> Iterator[None]:
        with self._held(), self.dialect.lenient(self.raw):
            yield

    def close(self) -> None:
        with self.lock:
            self.reopen = None  # closed on purpose: a use after this is an error, not a reconnect
            self.raw.close()
