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
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from ..errors import LedgerError, UserError
from ..tokens import TokenCounter
from ._common import heads_of, hit, in_order, regex_hits, tail_start, words
from ._core import ENTRY_INSERT, _Core
from ._errors import (
    LedgerBadTarget,
    LedgerBusy,
    LedgerCorrupt,
    LedgerReadOnly,
    LedgerUnavailable,
)
from ._model import Entry, EntryHead, Scope, SearchHit
from ._postgres_checks import _PgChecks
from ._postgres_fts import fts_query, search_vectors
from ._postgres_schema import prepare_schema
from ._rows import COLUMNS, entry_from_row
from ._sql import POSTGRES
from ._sqlite_base import EntryCache
from ._target import parse_target, redact
from ._text import check_int, storable

Conn = psycopg.Connection[tuple[Any, ...]]

_ENTRY_COLS = COLUMNS["entries"]
_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)


class _PgBase:
    """One connection per ledger, guarded by a re-entrant lock so threads may share it."""

    _dialect = POSTGRES

    def __init__(
        self,
        url: str,
        *,
        counter: TokenCounter | None = None,
        schema: str | None = None,
        create: bool = True,
    ) -> None:
        parsed = parse_target(url)
        if parsed.kind != "postgres":
            raise LedgerBadTarget(
                parsed.described, "not a PostgreSQL URL", "write postgresql://user@host/database"
            )
        self.url = url
        self.schema = schema
        self.target = parsed.described + (f" (schema {schema})" if schema else "")
        self._password = parsed.password
        self._counter = counter
        self._lock = threading.RLock()
        self._depth = 0
        self._cache = EntryCache()
        self._conn = _connect(url, self.target, self._password)
        try:
            prepare_schema(self._conn, schema, create=create, target=self.target)
        except psycopg.Error as exc:
            self._conn.close()
            err = self._translate(exc, "preparing the ledger's tables")
            if isinstance(err, LedgerReadOnly):
                raise LedgerReadOnly(
                    self.target,
                    f"cannot create or migrate the ledger's tables ({err.what})",
                    "check that the user may create tables in the schema (or pass schema=...)",
                ) from exc
            raise err from exc
        except BaseException:
            self._conn.close()
            raise

    def _translate(self, exc: psycopg.Error, doing: str) -> LedgerError:
        return translate(exc, self.target, self._password, doing)

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
        """One transaction; nested calls become savepoints (all or nothing together). A
        ``psycopg`` error inside leaves as a coded :class:`~comal.errors.LedgerError`."""
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
            except psycopg.Error as exc:
                raise self._translate(exc, "writing" if self._depth == 1 else "reading") from exc
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

    @contextmanager
    def _lenient(self) -> Iterator[None]:
        """Nothing to relax: PostgreSQL never hands back text that is not valid UTF-8."""
        yield

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


class _PgReads(_PgBase, _PgChecks, _Core):
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
        check_int(start_seq=start_seq, end_seq=end_seq)
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
        return in_order(self.target, scope, ids, found, start_seq, end)

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
        check_int(start_seq=start_seq)
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                "SELECT id, seq, step, role, tokens FROM entries"
                " WHERE session_id = %s AND seq >= %s ORDER BY seq",
                (scope.session, start_seq),
            ).fetchall()
        return heads_of(self.target, scope, rows)

    def tail(self, scope: Scope, *, n: int | None = None, tokens: int | None = None) -> list[Entry]:
        """The newest entries: the last ``n``, or as many whole steps as fit in ``tokens``."""
        if not self._visible(scope):
            return []
        if n is None and tokens is None:
            raise UserError("tail needs n or tokens")
        check_int(n=n, tokens=tokens)
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
        check_int(entry_id=entry_id)
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
        check_int(limit=limit)
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

    # -- what the shared core needs from PostgreSQL -------------------------------------------
    def _insert_entries(self, c: Conn, rows: list[tuple[Any, ...]]) -> list[int]:
        returned = insert_rows(
            c,
            f"{ENTRY_INSERT} VALUES {{}} RETURNING seq, id",
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        ids = dict(returned)
        return [int(ids[r[1]]) for r in rows]

    def _index_entries(self, c: Conn, scope: Scope, entries: list[Entry]) -> None:
        self._index_text(c, "entries_fts", scope, [(e.id, e.message.text) for e in entries])

    def _index_summary(self, c: Conn, scope: Scope, record_id: int, text: str) -> None:
        self._index_text(c, "summaries_fts", scope, [(record_id, text)])

    def _index_text(
        self, c: Conn, table: str, scope: Scope, texts: Sequence[tuple[int, str]]
    ) -> None:
        rows = [
            (ref, k, scope.session, vector)
            for ref, text in texts
            for k, vector in enumerate(search_vectors(text))
        ]
        ref_column = "entry_id" if table == "entries_fts" else "record_id"
        insert_rows(
            c,
            f"INSERT INTO {table} ({ref_column}, chunk, session_id, tsv) VALUES {{}}",
            "(%s, %s, %s, %s::tsvector)",
            rows,
        )

    def _forget_text(self, c: Conn, session: str) -> None:
        """Nothing: the full-text rows go with their entries and records (ON DELETE CASCADE)."""

    def _session_tables(self, c: Conn) -> list[str]:
        return [
            r[0]
            for r in c.execute(
                "SELECT table_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name = 'session_id'"
                " ORDER BY table_name"
            ).fetchall()
        ]


def _connect(url: str, target: str, password: str | None) -> Conn:
    try:
        conn = psycopg.connect(url, autocommit=False, client_encoding="UTF8")
    except psycopg.ProgrammingError as exc:
        raise LedgerBadTarget(
            target,
            f"the URL is not a valid connection string ({redact(_first_line(exc), password)})",
            "write postgresql://user@host:port/database, options after ?",
        ) from exc
    except psycopg.Error as exc:
        raise LedgerUnavailable(
            target,
            f"cannot open the PostgreSQL ledger ({redact(_first_line(exc), password)})",
            "check the URL, the credentials and that the server is running",
        ) from exc
    encoding = conn.info.parameter_status("server_encoding")
    if encoding != "UTF8":
        conn.close()
        raise LedgerUnavailable(
            target,
            f"the database is encoded as {encoding!r}, not UTF8",
            "create it with ENCODING 'UTF8' TEMPLATE template0",
        )
    return conn


def translate(exc: psycopg.Error, target: str, password: str | None, doing: str) -> LedgerError:
    """A coded error for a ``psycopg`` failure; the message never holds the password."""
    text = redact(_first_line(exc), password)
    state = exc.sqlstate or ""
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.ReadOnlySqlTransaction):
        return LedgerReadOnly(
            target,
            f"cannot write while {doing} ({text})",
            "grant the ledger's role write access to its schema and tables, or use one that has it",
        )
    if state in ("XX001", "XX002"):
        return LedgerCorrupt(
            target,
            f"the database reports damaged data while {doing} ({text})",
            "run `comal verify`, and restore the database from a backup",
        )
    if state.startswith("40") or state == "55P03":
        return LedgerBusy(
            target, f"a conflicting transaction held the ledger while {doing} ({text})", "retry"
        )
    if isinstance(exc, psycopg.OperationalError) or state.startswith(("08", "53", "57")):
        return LedgerUnavailable(
            target,
            f"the server failed while {doing} ({text})",
            "check that the server is running and reachable and has space, then retry",
        )
    return LedgerError(
        f"{target}: {doing} failed ({type(exc).__name__}: {text}); run `comal verify`, and "
        "report it if the ledger is sound"
    )


def insert_rows(
    c: Conn, statement: str, row: str, rows: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """Multi-row INSERTs, one round trip per thousand rows; returns any RETURNING rows."""
    returned: list[tuple[Any, ...]] = []
    for k in range(0, len(rows), 1000):
        batch = rows[k : k + 1000]
        cur = c.execute(
            statement.format(", ".join([row] * len(batch))), [v for r in batch for v in r]
        )
        if cur.description is not None:
            returned += cur.fetchall()
    return returned


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
