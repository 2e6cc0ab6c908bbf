"""Connection plumbing shared by the SQLite ledger's parts: pragmas, transactions, scoping."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self

from ..messages import (
    Message,
)
from ..tokens import TokenCounter, Usage, default_counter
from ._model import (
    Entry,
    Scope,
    log,
)
from ._schema import migrate

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class EntryCache:
    """Decoded entries by id, bounded by their stored body size (least recently used first).

    Safe because entries are append-only: an id always names the same bytes.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[int, Entry] = OrderedDict()
        self._bytes = 0

    def get_many(self, ids: list[int]) -> dict[int, Entry]:
        found: dict[int, Entry] = {}
        for i in ids:
            e = self._items.get(i)
            if e is not None:
                self._items.move_to_end(i)
                found[i] = e
        return found

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def put(self, entry: Entry) -> None:
        if entry.id in self._items or entry.size > self.max_bytes // 8:
            return
        self._items[entry.id] = entry
        self._bytes += entry.size
        while self._bytes > self.max_bytes:
            _, old = self._items.popitem(last=False)
            self._bytes -= old.size


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class UsageInput:
    """Usage measured for the model call that produced a step's assistant message."""

    usage: Usage
    model: str | None = None
    protocol: str | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StepInput:
    messages: Sequence[Message]
    usages: Sequence[UsageInput] = ()
    created_at: str | None = None


class _Base:
    """One connection per ledger, guarded by a re-entrant lock so threads may share it."""

    def __init__(
        self,
        path: str | Path,
        *,
        counter: TokenCounter | None = None,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.counter = counter if counter is not None else default_counter()
        self._lock = threading.RLock()
        self._depth = 0
        self._cache = EntryCache()
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(f"PRAGMA synchronous = {synchronous}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._conn.execute("PRAGMA busy_timeout = 10000")
        migrate(self._conn)

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested calls become savepoints (all or nothing together).

        BEGIN IMMEDIATE takes the write lock up front so a concurrent writer waits
        (busy_timeout) instead of failing half way through a step.
        """
        with self._lock:
            depth = self._depth
            self._depth += 1
            begin, commit, rollback = (
                ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
                if depth == 0
                else (f"SAVEPOINT sp{depth}", f"RELEASE sp{depth}", f"ROLLBACK TO sp{depth}")
            )
            self._conn.execute(begin)
            try:
                yield self._conn
            except BaseException:
                self._conn.execute(rollback)
                if depth:
                    self._conn.execute(f"RELEASE sp{depth}")
                raise
            finally:
                self._depth -= 1
            self._conn.execute(commit)

    def _session_row(self, scope: Scope) -> sqlite3.Row | tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._conn.execute(
            "SELECT next_seq, status FROM sessions WHERE id = ? AND tenant = ? AND agent = ?",
            (scope.session, scope.tenant, scope.agent),
        ).fetchone()
        return row

    def _visible(self, scope: Scope) -> bool:
        """LED-2: a scope that does not resolve to a stored session reads as empty."""
        with self._lock:
            if self._session_row(scope) is None:
                log.warning("ledger read refused: no session %s for tenant/agent", scope.session)
                return False
            return True

    # -- raw access for verify ---------------------------------------------------------------
    def _raw_rows(self) -> Iterator[tuple[Any, ...]]:
        with self._lock:
            yield from self._conn.execute(
                "SELECT session_id, seq, step, role, digest, output_digest, body FROM entries"
                " ORDER BY session_id, seq"
            )
