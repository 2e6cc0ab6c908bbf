"""The PostgreSQL ledger (LED-4 scale-out): the same interface and semantics as SQLite's.

Open one with ``open_ledger("postgresql://user:password@host/db")`` or construct
:class:`PostgresLedger` with a ``schema`` to keep several ledgers in one database. Writers on
different machines may share a ledger: appends lock their session row, so sequences stay dense;
its secret is ``COMAL_LEDGER_SECRET`` (or ``secret=``), the same for every process.

PostgreSQL's dialect: row locks (``FOR UPDATE``), advisory locks for writers of a name and for
the session lock, search vectors (``_postgres_fts``: an entry's are made by the next search of its
session, ``_postgres_index``), and ``amcheck`` as the database's own check.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable
from typing import Any

from psycopg import sql

from ..errors import LedgerError
from ..tokens import TokenCounter
from ._db import Db
from ._dialect import lock_key
from ._errors import LedgerBadTarget, LedgerReadOnly, LedgerTimeout, MemorySearchTimeout
from ._ledger import Store
from ._memory_notes import LIVE
from ._model import Scope
from ._pg_lock import DEFAULT_TTL_S, PgSessionLock, pg_lock_holder
from ._postgres_fts import fts_query, search_vectors
from ._postgres_index import (
    SOURCES,
    catch_up,
    insert_vectors,
    pending_among,
    queue_entries,
    sound_texts,
)
from ._postgres_open import PgDialectBase, connect, prepare, reconnect
from ._seal import Keying, Secret
from ._target import parse_target

__all__ = ["PostgresLedger"]


class PostgresDialect(PgDialectBase):
    def exclusive(self, db: Db, name: str) -> None:
        # The key serve derived when it took this lock itself: processes of either version
        # exclude each other.
        db.execute("SELECT pg_advisory_xact_lock(?)", (lock_key(f"comal:serve:{name}"),))

    def arm(self, db: Db, deadline: float) -> None:
        # Per statement, from what is left now (Db.execute checks the block's total); inside a
        # transaction the setting also goes with its rollback.
        ms = max(1, math.ceil((deadline - time.monotonic()) * 1000))
        db.raw.execute(f"SET statement_timeout = {ms}")

    def disarm(self, db: Db) -> None:
        # In a transaction the cancelled statement aborted, this fails: its rollback undoes it.
        with contextlib.suppress(*self.errors):
            db.raw.execute("SET statement_timeout TO DEFAULT")

    def index_text(
        self, db: Db, table: str, session: str, texts: Iterable[tuple[int, str]]
    ) -> None:
        if table == "entries_fts":  # queued: the next search of the session indexes them
            queue_entries(db, session, texts)
        else:
            insert_vectors(db, table, session, texts)

    def ranked(
        self, db: Db, table: str, scope: Scope, query: str, limit: int
    ) -> list[tuple[int, float]]:
        tsquery = fts_query(query)
        if tsquery is None:
            return []
        if table == "entries_fts":
            catch_up(db, "session_id = ?", (scope.session,))
        ref = SOURCES[table][1]
        rows = db.execute(
            f"SELECT {ref}, max(ts_rank(tsv, %(q)s::tsquery)) AS r FROM {table}"
            f" WHERE session_id = %(s)s AND tsv @@ %(q)s::tsquery GROUP BY {ref}"
            f" ORDER BY r DESC, {ref} LIMIT %(n)s",
            {"s": scope.session, "q": tsquery, "n": limit},
        ).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def ranked_agent(
        self,
        db: Db,
        table: str,
        tenant: str,
        agent: str,
        query: str,
        limit: int,
        *,
        exclude: str | None,
        budget_s: float,
    ) -> list[tuple[int, float]]:
        tsquery = fts_query(query)
        if tsquery is None:
            return []
        ref = SOURCES[table][1]
        if table == "entries_fts":
            catch_up(db, "session_id IN (SELECT id FROM sessions WHERE tenant = ? AND agent = ?)",
                     (tenant, agent))  # fmt: skip
            scoped = " JOIN sessions s ON s.id = f.session_id WHERE s.tenant = %(t)s"
            scoped += " AND s.agent = %(a)s AND f.session_id IS DISTINCT FROM %(x)s"
        else:
            scoped = " JOIN memories m ON m.id = f.memory_id WHERE m.tenant = %(t)s"
            # A person's note has no session; a forgotten memory is never found (DRV-7).
            scoped += " AND m.agent = %(a)s AND (m.session_id IS NULL"
            scoped += f" OR m.session_id IS DISTINCT FROM %(x)s) AND {LIVE}"
        sql = (
            f"SELECT f.{ref}, max(ts_rank(f.tsv, %(q)s::tsquery)) AS r FROM {table} f{scoped}"
            f" AND f.tsv @@ %(q)s::tsquery GROUP BY f.{ref} ORDER BY r DESC, f.{ref} LIMIT %(n)s"
        )
        args = {"t": tenant, "a": agent, "x": exclude, "q": tsquery, "n": limit}
        # The ledger's one time bound (Db.bounded: statement_timeout while it holds), inside
        # its own (sub)transaction, which a cancelled statement rolls back alone.
        try:
            with db.bounded(budget_s), db.atomic() as c:
                rows = c.execute(sql, args).fetchall()
        except LedgerTimeout:
            raise MemorySearchTimeout(
                f"the search ran past its {budget_s:g} s budget and was stopped; search "
                "fewer or rarer words"
            ) from None
        return [(int(r[0]), float(r[1])) for r in rows]

    def forget_text(self, db: Db, session: str) -> None:
        """Nothing: the full-text rows go with their entries and records (ON DELETE CASCADE)."""

    def rebuild_search_index(self, db: Db) -> None:
        """Recompute every entry's and summary record's search vectors from the stored text."""
        db.execute("DELETE FROM fts_pending")  # every entry is indexed below
        for table in ("entries_fts", "summaries_fts"):
            db.execute(f"DELETE FROM {table}")
            by_session: dict[str, list[tuple[Any, ...]]] = {}
            for r in db.execute(_sound_rows(table, "session_id")).fetchall():
                by_session.setdefault(r[1], []).append((r[0], r[2], r[3]))
            for session, found in by_session.items():
                insert_vectors(db, table, session, sound_texts(found, table))

    def search_check(self, db: Db) -> list[str]:
        """Each entry's and summary record's stored search vectors against those its text gives
        now, both through PostgreSQL's own tsvector text form so they compare."""
        problems: list[str] = []
        for table in ("entries_fts", "summaries_fts"):
            ref, bad, after = SOURCES[table][1], 0, -1
            while True:
                with db.reading() as c:
                    rows = c.execute(_sound_rows(table, None, page=True), (after,)).fetchall()
                    if not rows:
                        break
                    after = rows[-1][0]
                    texts = sound_texts(rows, table)
                    if table == "entries_fts":  # a queued entry has no vectors yet
                        queued = pending_among(c, [i for i, _ in texts])
                        texts = [(i, t) for i, t in texts if i not in queued]
                    fresh = [(i, k, v) for i, t in texts for k, v in enumerate(search_vectors(t))]
                    stored = c.execute(
                        f"SELECT {ref}, chunk, tsv::text FROM {table} WHERE {ref} = ANY(%s)"
                        f" ORDER BY {ref}, chunk",
                        ([i for i, _ in texts],),
                    ).fetchall()
                    expected = c.execute(
                        "SELECT i, k, v::tsvector::text FROM unnest(%s::bigint[], %s::int[],"
                        " %s::text[]) AS x(i, k, v) ORDER BY i, k",
                        ([f[0] for f in fresh], [f[1] for f in fresh], [f[2] for f in fresh]),
                    ).fetchall()
                bad += len({r[0] for r in set(stored) ^ set(expected)})
            if bad:
                problems.append(
                    f"full-text index {table}: {bad} rows do not match their stored text; "
                    "rebuild it (rebuild_search_index)"
                )
        return problems

    def database_check(self, db: Db) -> tuple[str, list[str]]:
        """``amcheck``'s ``bt_index_check`` (with ``heapallindexed``) on every b-tree index of
        the ledger's schema, when the extension is installed and the role may run it; otherwise
        "not checked" and why. PostgreSQL's own page checksums, if enabled, guard the heap."""
        with db.reading() as c:
            found = c.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n"
                " ON n.oid = e.extnamespace WHERE e.extname = 'amcheck'"
            ).fetchone()
            checksums = c.execute("SHOW data_checksums").fetchone()
            indexes = c.execute(
                "SELECT c.oid::regclass::text FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam"
                " WHERE c.relkind = 'i' AND a.amname = 'btree' AND n.nspname = current_schema()"
                " ORDER BY 1"
            ).fetchall()
        sums = f"page checksums {'on' if checksums and checksums[0] == 'on' else 'off'}"
        if found is None:
            return (
                "not checked: the amcheck extension is not installed in this database (a "
                f"superuser can run CREATE EXTENSION amcheck); {sums}",
                [],
            )
        schema = sql.Identifier(found[0]).as_string(db.raw)
        call = f"SELECT {schema}.bt_index_check(%s::regclass, true)"
        problems: list[str] = []
        for (index,) in indexes:
            try:
                with db.atomic() as c:
                    c.execute(call, (index,))
            except LedgerReadOnly:
                return (
                    "not checked: this role may not run amcheck's bt_index_check (GRANT EXECUTE "
                    f"ON FUNCTION bt_index_check(regclass, boolean) to it); {sums}",
                    [],
                )
            except LedgerError as exc:
                problems.append(f"index {index}: {exc}")
        return ("ok" if not problems else "faults"), problems


def _place(db: Db) -> str:
    """Where the ledger is, as this machine reaches it: server, database and schema (what it
    last saw there is remembered under this name, ``_rollback``)."""
    with db.reading() as c:
        database, schema = c.execute("SELECT current_database(), current_schema()").fetchone()
    info = db.raw.info
    return f"postgresql://{info.host}:{info.port}/{database}#{schema}"


def _sound_rows(table: str, extra: str | None, *, page: bool = False) -> str:
    source = SOURCES[table][0]
    cols = "id, " + (f"{extra}, " if extra else "") + "digest, body"
    where = ["table_name = 'summary'"] if source == "records" else []
    if page:
        where.append("id > %s")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {cols} FROM {source}{clause} ORDER BY id" + (" LIMIT 500" if page else "")


class PostgresLedger(Store):
    """The ledger in a PostgreSQL database, over one psycopg connection.

    ``schema`` names the PostgreSQL schema holding the tables (created if missing and
    ``create``); without it the connection's ``search_path`` decides (normally ``public``).
    ``secret`` keys the seals instead of ``COMAL_LEDGER_SECRET``; ``strict=False`` opens a
    ledger whose seals cannot be checked, or that is older than this machine last saw it, to
    report on it.
    """

    def __init__(
        self,
        url: str,
        *,
        counter: TokenCounter | None = None,
        schema: str | None = None,
        create: bool = True,
        secret: Secret | None = None,
        strict: bool = True,
    ) -> None:
        parsed = parse_target(url)
        if parsed.kind != "postgres":
            raise LedgerBadTarget(
                parsed.described, "not a PostgreSQL URL", "write postgresql://user@host/database"
            )
        self.url = url
        self.schema = schema
        target = parsed.described + (f" (schema {schema})" if schema else "")
        dialect = PostgresDialect(parsed.password)
        db = Db(connect(url, target, parsed.password), dialect, target)
        keying = Keying("postgres", target, secret, memory=False, strict=strict)
        try:
            prepare(db, schema, keying, create=create)
            keying.place = _place(db)
        except LedgerReadOnly as err:
            db.close()
            raise LedgerReadOnly(
                target,
                f"cannot create or migrate the ledger's tables ({err.what})",
                "check that the user may create tables in the schema (or pass schema=...)",
            ) from err
        except BaseException:
            db.close()
            raise
        db.reopen = lambda: reconnect(url, target, parsed.password, schema)
        super().__init__(db, keying, counter)

    def index_text(self) -> int:
        """Index every queued entry now; returns how many (a search indexes its own sessions'
        first, so this is only for warming the index ahead of searches)."""
        return catch_up(self._db, "TRUE", ())

    def session_lock(self, scope: Scope, *, ttl: float = DEFAULT_TTL_S) -> PgSessionLock:
        """Take the session's lock (RES-2, SCL-1): an advisory lock on a connection of its own
        and a lease row kept fresh by a heartbeat every ``ttl``/3 seconds (see ``_pg_lock``);
        :class:`~comal.ledger.SessionLocked` while another process holds it. ``lock.stale`` is
        the row of a dead holder (its connection ended, or its lease expired), when one was
        cleared."""
        with self._reading() as c:
            schema = str(c.execute("SELECT current_schema()").fetchone()[0])
        lock = PgSessionLock(
            self.url, scope.session, namespace=self.schema or "", schema=schema, ttl=ttl
        )
        lock.acquire()
        return lock

    def session_lock_holder(self, scope: Scope) -> dict[str, Any] | None:
        """Who holds the session's lock now (its lease row's owner, host and pid), read
        without taking it: a hint, the holder may let go a moment later; ``None``: nobody."""
        key = lock_key(f"comal:{self.schema or ''}:{scope.session}")
        with self._reading() as c:
            return pg_lock_holder(c.execute, key, scope.session)
