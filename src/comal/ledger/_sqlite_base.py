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

from ..errors import LedgerError, UserError
from ..messages import Message
from ..tokens import TokenCounter, Usage
from ._model import Entry
from ._sql import SQLITE
from ._sqlite_open import open_sqlite, translate
from ._target import describe_target

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

    _dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        counter: TokenCounter | None = None,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
    ) -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise UserError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        self.target = describe_target(self.path)
        self._counter = counter
        self._lock = threading.RLock()
        self._depth = 0
        self._cache = EntryCache()
        self._conn = open_sqlite(self.path, create=create, target=self.target)
        self._conn.execute(f"PRAGMA synchronous = {synchronous}")

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _translate(self, exc: sqlite3.Error | UnicodeDecodeError, doing: str) -> LedgerError:
        return translate(exc, self.target, doing)

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested calls become savepoints (all or nothing together).

        BEGIN IMMEDIATE takes the write lock up front so a concurrent writer waits
        (busy_timeout) instead of failing half way through a step. A ``sqlite3`` error inside
        leaves as a coded :class:`~comal.errors.LedgerError`.
        """
        with self._lock:
            depth = self._depth
            begin, commit = (
                ("BEGIN IMMEDIATE", "COMMIT")
                if depth == 0
                else (f"SAVEPOINT sp{depth}", f"RELEASE sp{depth}")
            )
            try:
                self._conn.execute(begin)
            except sqlite3.Error as exc:
                raise self._translate(exc, "starting a write") from exc
            self._depth += 1
            try:
                yield self._conn
            except BaseException as exc:
                self._undo(depth)
                if isinstance(exc, sqlite3.Error | UnicodeDecodeError):
                    raise self._translate(exc, "writing") from exc
                raise
            finally:
                self._depth -= 1
            try:
                self._conn.execute(commit)
            except sqlite3.Error as exc:
                self._undo(depth)
                raise self._translate(exc, "committing") from exc

    def _undo(self, depth: int) -> None:
        # SQLite rolls a transaction back by itself after some errors (a full disk, an I/O
        # error): then there is nothing left to undo here.
        try:
            if depth == 0:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
            else:
                self._conn.execute(f"ROLLBACK TO sp{depth}")
                self._conn.execute(f"RELEASE sp{depth}")
        except sqlite3.Error:
            pass

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads, under the lock; ``sqlite3`` errors leave coded."""
        with self._lock:
            try:
                yield self._conn
            except (sqlite3.Error, UnicodeDecodeError) as exc:
                raise self._translate(exc, "reading") from exc

    @contextmanager
    def _lenient(self) -> Iterator[None]:
        """Within: text columns decode with ``surrogateescape`` instead of failing the query."""
        with self._lock:
            old = self._conn.text_factory
            self._conn.text_factory = _lenient_text
            try:
                yield
            finally:
                self._conn.text_factory = old

    # -- raw access for verify ---------------------------------------------------------------
    def _raw_rows(self) -> Iterator[tuple[Any, ...]]:
        with self._reading() as c:
            yield from c.execute(
                "SELECT session_id, seq, step, role, digest, output_digest, body FROM entries"
                " ORDER BY session_id, seq"
            )


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")
