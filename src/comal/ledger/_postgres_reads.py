"""Plumbing and reads of the PostgreSQL ledger: one connection, explicit transactions, scoping.

Every statement runs inside :meth:`_PgBase.atomic` (autocommit is off): a statement outside it
would open an implicit transaction that swallowed the next ``atomic()`` as a savepoint and left
its writes uncommitted, so ``atomic()`` refuses to start over one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from ..errors import LedgerError, UserError
from ..tokens import TokenCounter, default_counter
from ._common import (
    checkpoint_from_row,
    entry_from_row,
    hit,
    record_from_row,
    regex_hits,
    request_from_row,
    tail_start,
    words,
)
from ._model import (
    CheckpointRecord,
    Entry,
    EntryHead,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SearchHit,
    log,
)
from ._postgres_schema import fts_query, prepare_schema, storable
from ._sqlite_base import EntryCache

Conn = psycopg.Connection[tuple[Any, ...]]

_ENTRY_COLS = (
    "id, session_id, seq, step, role, tokens, size, created_at, digest, output_digest, body"
)
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
_CHECKPOINT_COLS = "id, session_id, first_seq, last_seq, tokens, digest, created_at, body, meta"


class _PgBase:
    """One connection per ledger, guarded by a re-entrant lock so threads may share it."""

    def __init__(
        self, url: str, *, counter: TokenCounter | None = None, schema: str | None = None
    ) -> None:
        self.url = url
        self.schema = schema
        self.counter = counter if counter is not None else default_counter()
        self._lock = threading.RLock()
        self._depth = 0
        self._cache = EntryCache()
        self._conn = _connect(url)
        try:
            prepare_schema(self._conn, schema)
        except psycopg.Error as exc:
            self._conn.close()
            raise LedgerError(
                f"cannot prepare the ledger's tables in {_where(url)}: {_first_line(exc)}; "
                "check that the user may create tables in the schema (or pass schema=...)"
            ) from exc
        except BaseException:
            self._conn.close()
            raise

    # -- plumbing -----------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def atomic(self) -> Iterator[Conn]:
        """One transaction; nested calls become savepoints (all or nothing together)."""
        with self._lock:
            if self._depth == 0 and self._conn.info.transaction_status in _OPEN:
                raise LedgerError(
                    "the ledger's PostgreSQL connection is inside a transaction it did not open "
                    "(a statement ran outside atomic()); close the ledger and open it again"
                )
            self._depth += 1
            try:
                with self._conn.transaction():
                    yield self._conn
            finally:
                self._depth -= 1

    @contextmanager
    def _reading(self) -> Iterator[Conn]:
        # A read joins the caller's transaction rather than paying for a savepoint: it has
        # nothing to roll back.
        with self._lock:  # depth is only read under the lock: another thread may be inside
            if self._depth:
                yield self._conn
            else:
                with self.atomic() as c:
                    yield c

    def _session_row(self, scope: Scope, *, lock: bool = False) -> tuple[Any, ...] | None:
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return None  # PostgreSQL cannot have stored such a name, so no session has it
        # FOR UPDATE serializes appends to one session: the second writer waits for the first
        # to commit and then reads its next_seq, so two writers never take the same seq.
        query = (
            "SELECT next_seq, status FROM sessions WHERE id = %s AND tenant = %s AND agent = %s"
            + (" FOR UPDATE" if lock else "")
        )
        with self._reading() as c:
            return c.execute(query, (scope.session, scope.tenant, scope.agent)).fetchone()

    def _visible(self, scope: Scope) -> bool:
        """LED-2: a scope that does not resolve to a stored session reads as empty."""
        if self._session_row(scope) is None:
            log.warning("ledger read refused: no session %s for tenant/agent", scope.session)
            return False
        return True

    # -- raw access for verify ---------------------------------------------------------------
    def _raw_rows(self) -> Iterator[tuple[Any, ...]]:
        # Keyset pages, each in its own short read: nothing stays open between yields, so an
        # abandoned or interleaved walk holds no lock, snapshot or transaction.
        after: tuple[str, int] = ("", -1)
        while True:
            with self._reading() as c:
                rows = c.execute(
                    "SELECT session_id, seq, step, role, digest, output_digest, body FROM entries"
                    " WHERE (session_id, seq) > (%s, %s) ORDER BY session_id, seq LIMIT 500",
                    after,
                ).fetchall()
            yield from rows
            if len(rows) < 500:
                return
            after = (rows[-1][0], rows[-1][1])


class _PgReads(_PgBase):
    """Every read takes a Scope and reads nothing when it does not resolve (LED-2)."""

    def _entries(self, query: str, args: Sequence[Any]) -> list[Entry]:
        with self._reading() as c:
            rows = c.execute(query, tuple(args)).fetchall()
        return [entry_from_row(r) for r in rows]

    def _load(self, ids: list[int]) -> dict[int, Entry]:
        """Entries by id: decoded ones from the cache, the rest read in batches."""
        found = self._cache.get_many(ids)
        missing = [i for i in ids if i not in found]
        for k in range(0, len(missing), 1000):
            for e in self._entries(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE id = ANY(%s)", (missing[k : k + 1000],)
            ):
                found[e.id] = e
                self._cache.put(e)
        return found

    def entries(
        self, scope: Scope, *, start_seq: int = 0, end_seq: int | None = None
    ) -> list[Entry]:
        """Entries with ``start_seq <= seq <= end_seq`` in order; ids come from the covering
        index and only bodies not already in the cache are read and decoded."""
        with self._reading() as c:
            if not self._visible(scope):
                return []
            end = end_seq if end_seq is not None else 2**62
            ids = [
                r[0]
                for r in c.execute(
                    "SELECT id FROM entries WHERE session_id = %s AND seq BETWEEN %s AND %s"
                    " ORDER BY seq",
                    (scope.session, start_seq, end),
                )
            ]
            found = self._load(ids)
        return [found[i] for i in ids]

    def iter_entries(self, scope: Scope, *, batch: int = 500) -> Iterator[Entry]:
        """Stream a whole session in batches, so memory stays bounded on huge sessions."""
        seq = 0
        while True:
            chunk = self.entries(scope, start_seq=seq, end_seq=seq + batch - 1)
            if not chunk:
                return
            yield from chunk
            seq = chunk[-1].seq + 1

    def heads(self, scope: Scope, *, start_seq: int = 0) -> list[EntryHead]:
        """Small columns only, read from the covering index (no bodies)."""
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                "SELECT id, seq, step, role, tokens FROM entries"
                " WHERE session_id = %s AND seq >= %s ORDER BY seq",
                (scope.session, start_seq),
            ).fetchall()
        return [EntryHead(*r) for r in rows]

    def tail(self, scope: Scope, *, n: int | None = None, tokens: int | None = None) -> list[Entry]:
        """The newest entries: the last ``n``, or as many whole steps as fit in ``tokens``."""
        if not self._visible(scope):
            return []
        if n is None and tokens is None:
            raise UserError("tail needs n or tokens")
        if n is not None:
            newest = self._entries(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = %s"
                " ORDER BY seq DESC LIMIT %s",
                (scope.session, n),
            )
            return list(reversed(newest))
        assert tokens is not None
        # A server-side cursor fetches the index backwards in batches and stops at the budget,
        # so the cost follows the tail, not the session.
        with self._reading() as c, c.cursor(name="comal_tail") as cur:
            cur.itersize = 256
            cur.execute(
                "SELECT seq, step, tokens FROM entries WHERE session_id = %s ORDER BY seq DESC",
                (scope.session,),
            )
            start = tail_start(cur, tokens)
        return [] if start is None else self.entries(scope, start_seq=start)

    def entry(self, scope: Scope, entry_id: int) -> Entry | None:
        with self._reading():
            if not self._visible(scope):
                return None
            found = self._load([entry_id]).get(entry_id)
        return found if found is not None and found.session == scope.session else None

    def entry_by_call(self, scope: Scope, call_id: str) -> Entry | None:
        if not self._visible(scope) or not storable(call_id):
            return None
        rows = self._entries(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = %s AND call_id = %s"
            " ORDER BY seq LIMIT 1",
            (scope.session, call_id),
        )
        return rows[0] if rows else None

    def search(
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text (FTS5 query syntax, translated) or regex search over a session (LED-5).

        Regexes run in Python over the session's text, as in SQLite, so a pattern means the same
        on both backends (PostgreSQL's ``~`` speaks another dialect: ``\\b`` is a backspace).
        """
        if not self._visible(scope):
            return []
        if regex:
            return regex_hits(self.iter_entries(scope), query, limit)
        tsquery = fts_query(query)
        if tsquery is None:
            return []
        with self._reading() as c:
            ids = [
                r[0]
                for r in c.execute(
                    "SELECT entry_id FROM entries_fts"
                    " WHERE session_id = %(s)s AND tsv @@ %(q)s::tsquery GROUP BY entry_id"
                    " ORDER BY max(ts_rank(tsv, %(q)s::tsquery)) DESC, entry_id LIMIT %(n)s",
                    {"s": scope.session, "q": tsquery, "n": limit},
                )
            ]
            found = self._load(ids)
        query_words = words(query)
        return [hit(found[i], query_words) for i in ids]

    def requests(self, scope: Scope) -> list[RequestRecord]:
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                "SELECT id, session_id, entry_id, model, protocol, new_input, cache_read,"
                " cache_write, output, reasoning, meta FROM requests WHERE session_id = %s"
                " ORDER BY id",
                (scope.session,),
            ).fetchall()
        return [request_from_row(r) for r in rows]

    def checkpoints(self, scope: Scope) -> list[CheckpointRecord]:
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                f"SELECT {_CHECKPOINT_COLS} FROM checkpoints WHERE session_id = %s"
                " ORDER BY last_seq, id",
                (scope.session,),
            ).fetchall()
        return [checkpoint_from_row(r) for r in rows]

    def latest_checkpoint(self, scope: Scope) -> CheckpointRecord | None:
        with self._reading() as c:
            if not self._visible(scope):
                return None
            r = c.execute(
                f"SELECT {_CHECKPOINT_COLS} FROM checkpoints WHERE session_id = %s"
                " ORDER BY last_seq DESC, id DESC LIMIT 1",
                (scope.session,),
            ).fetchone()
        return None if r is None else checkpoint_from_row(r)

    def record(self, scope: Scope, table: RecordTable, record_id: int) -> Record | None:
        """One record of this session by id (None if it is not this session's)."""
        with self._reading() as c:
            if not self._visible(scope):
                return None
            r = c.execute(
                "SELECT id, session_id, kind, created_at, digest, body FROM records"
                " WHERE id = %s AND session_id = %s AND table_name = %s",
                (record_id, scope.session, table),
            ).fetchone()
        return None if r is None else record_from_row(r)

    def records(
        self, scope: Scope, table: RecordTable, *, kinds: Sequence[str] | None = None
    ) -> list[Record]:
        """A session's records of ``table`` in order; ``kinds`` narrows them in the query, so a
        caller looking for a few small events does not decode stored outputs."""
        if kinds is not None and not kinds:
            return []
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                "SELECT id, session_id, kind, created_at, digest, body FROM records"
                " WHERE session_id = %s AND table_name = %s"
                + ("" if kinds is None else " AND kind IN (" + ",".join(["%s"] * len(kinds)) + ")")
                + " ORDER BY id",
                (scope.session, table, *(kinds or ())),
            ).fetchall()
        return [record_from_row(r) for r in rows]


def _connect(url: str) -> Conn:
    try:
        conn = psycopg.connect(url, autocommit=False, client_encoding="UTF8")
    except psycopg.Error as exc:
        raise LedgerError(
            f"cannot open the PostgreSQL ledger at {_where(url)}: {_first_line(exc)}; "
            "check the URL, the credentials and that the server is running"
        ) from exc
    encoding = conn.info.parameter_status("server_encoding")
    if encoding != "UTF8":
        conn.close()
        raise LedgerError(
            f"PostgreSQL database {_where(url)} is encoded as {encoding!r}, not UTF8; create it "
            "with ENCODING 'UTF8' TEMPLATE template0"
        )
    return conn


def _where(url: str) -> str:
    # Host, port and database only: the URL may carry a password.
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the given URL"
    host, port, db = info.get("host", "localhost"), info.get("port", "5432"), info.get("dbname")
    return f"{host}:{port}/{db or '(default database)'}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
