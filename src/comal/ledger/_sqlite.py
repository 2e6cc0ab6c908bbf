"""The embedded SQLite ledger (LED-4): WAL, foreign keys, one transaction per step.

SQLite's dialect: ``BEGIN IMMEDIATE`` takes the database's only write lock when a write starts
(so no row locks, and writers of a name are already serialized), budget reads name their covering
index, FTS5 contentless tables index the text (the entries' index trails the appends, caught up by
each search), and the database checks itself with ``integrity_check``, each FTS5 table's own
check and a comparison of its schema with the one the migrations make.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..errors import LedgerError, UserError
from ..tokens import TokenCounter
from ._db import Db
from ._dialect import Dialect
from ._errors import BadSearchQuery, LedgerBadTarget, LedgerTimeout, MemorySearchTimeout
from ._ledger import Store
from ._locks import SessionLock, WriterGate, lock_holder, lock_path
from ._memory_notes import LIVE
from ._migrate import statements
from ._model import Scope, log
from ._schema import MIGRATIONS
from ._seal import Keying, Secret
from ._sqlite_fts import entry_text, forget_session, indexed_texts, rebuild, search_check, upto
from ._sqlite_fts import fts_text as _fts_text
from ._sqlite_open import open_sqlite, translate
from ._target import parse_target

__all__ = ["SQLiteLedger", "Synchronous"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
_FIX = "fix it, or search without --fts"


class SQLiteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"
    begin = "BEGIN IMMEDIATE"
    for_update = ""
    budget_index = " INDEXED BY entries_budget"
    lazy_cursor = True
    packs_bodies = True
    errors = (sqlite3.Error, UnicodeDecodeError)
    types: ClassVar[Mapping[str, str]] = {
        "pk": "INTEGER PRIMARY KEY",
        "key": "TEXT",
        "int": "INTEGER",
        "real": "REAL",
        "entries_key": "UNIQUE (session_id, seq)",
        "rowless": " WITHOUT ROWID",
    }
    place = "SQLite database"
    foreign_todo = "check the path (or COMAL_LEDGER), or give a new file name to start a ledger"

    def translate(self, exc: BaseException, target: str, doing: str) -> LedgerError:
        assert isinstance(exc, sqlite3.Error | UnicodeDecodeError)
        return translate(exc, target, doing)

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.in_transaction)

    def run_script(self, db: Db, sql: str) -> None:
        for statement in statements(sql):
            db.execute(statement)

    def tables(self, db: Db) -> set[str]:
        return {
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND name NOT LIKE 'sqlite_%'"
            )
        }

    def columns(self, db: Db, table: str) -> set[str]:
        return {r[0] for r in db.execute("SELECT name FROM pragma_table_info(?)", (table,))}

    def version(self, db: Db) -> int:
        return int(db.execute("PRAGMA user_version").fetchone()[0])

    def lock_migrations(self, db: Db) -> None:
        """Nothing: the migration's ``BEGIN IMMEDIATE`` holds the database's only write lock."""

    def migrated(self, db: Db, applied: int) -> None:
        # The count of applied migrations, whatever order they were merged in.
        db.execute(f"PRAGMA user_version = {int(applied)}")

    def exclusive(self, db: Db, name: str) -> None:
        """Nothing: the transaction holds the database's only write lock from its start."""

    def arm(self, db: Db, deadline: float) -> None:
        # Called every thousand virtual-machine steps, FTS5's own reads included: a runaway
        # MATCH ends within microseconds of the deadline with SQLITE_INTERRUPT.
        db.raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)

    def disarm(self, db: Db) -> None:
        db.raw.set_progress_handler(None, 0)

    def ids_column(self, table: str, n: int) -> str:
        # The transaction holds the database's only write lock (BEGIN IMMEDIATE), so the next
        # ids are past the largest one, as SQLite itself would pick them.
        return f"(SELECT max(id) FROM {table})"

    def ids_of(self, value: Any, n: int) -> list[int]:
        first = int(value or 0) + 1
        return list(range(first, first + n))

    def session_tables(self, db: Db) -> list[str]:
        return [
            r[0]
            for r in db.execute(
                "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) p"
                " WHERE m.type = 'table' AND p.name = 'session_id' ORDER BY m.name"
            )
        ]

    @contextmanager
    def lenient(self, raw: Any) -> Iterator[None]:
        old = raw.text_factory
        raw.text_factory = _lenient_text
        try:
            yield
        finally:
            raw.text_factory = old

    def index_text(
        self, db: Db, table: str, session: str, texts: Iterable[tuple[int, str]]
    ) -> None:
        if table != "entries_fts":  # the entries' index trails them (catch_up)
            db.executemany(f"INSERT INTO {table} (rowid, text) VALUES (?, ?)",
                           [(i, _fts_text(t)) for i, t in texts])  # fmt: skip

    def catch_up(self, db: Db, batch: int = 2000) -> int:
        """Bring the entries' full-text index up to date; how many entries were indexed.

        Each batch is one transaction with its high-water mark, so a crash mid-way leaves the
        index consistent with ``fts_state`` and the next search resumes where it stopped."""
        done = 0
        while True:
            with db.atomic() as c:
                rows = c.execute(
                    "SELECT id, digest, body FROM entries WHERE id > ? ORDER BY id LIMIT ?",
                    (upto(c), batch),
                ).fetchall()
                if not rows:
                    return done
                texts, damaged = indexed_texts(rows, entry_text)
                if damaged:
                    # Search is best effort over what is sound; reading such an entry raises.
                    log.warning("full-text index skipped %d damaged entries; run `comal verify`",
                                damaged)  # fmt: skip
                c.executemany("INSERT INTO entries_fts (rowid, text) VALUES (?, ?)", texts)
                c.execute("UPDATE fts_state SET upto = ? WHERE name = 'entries'", (rows[-1][0],))
            done += len(rows)

    def ranked(
        self, db: Db, table: str, scope: Scope, query: str, limit: int
    ) -> list[tuple[int, float]]:
        if table == "entries_fts":
            self.catch_up(db)
        source = {"entries_fts": "entries", "summaries_text_fts": "summaries"}[table]
        # The index holds every session. Handed "rowid IN (the session's ids)", FTS5 runs the
        # whole MATCH once per id (a 150-word query over 2,000 entries took 8 s); the range of
        # the session's ids is one scan, ranked inside FTS5, and the unary + keeps the exact
        # filter away from FTS5, applied to the rows it yields.
        ids = f"(SELECT {{}}(id) FROM {source} WHERE session_id = ?)"
        try:
            rows = db.execute(
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?"
                f" AND rowid BETWEEN {ids.format('min')} AND {ids.format('max')}"
                f" AND +rowid IN (SELECT id FROM {source} WHERE session_id = ?)"
                " ORDER BY rank LIMIT ?",
                (query, scope.session, scope.session, scope.session, limit),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorname == "SQLITE_INTERRUPT":
                raise  # the time bound (Db.bounded), not the query: translated by the caller
            raise BadSearchQuery(f"bad full-text query {query!r}: {exc}; {_FIX}") from exc
        except UnicodeEncodeError as exc:
            raise BadSearchQuery(f"bad full-text query {query!r}: {exc}; {_FIX}") from exc
        return [(int(r[0]), -float(r[1])) for r in rows]  # bm25 is lower-is-better

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
        if table == "entries_fts":
            self.catch_up(db)
        source, alias = {"entries_fts": ("entries", "e"), "memories_fts": ("memories", "m")}[table]
        scoped = (
            "s.tenant = ? AND s.agent = ? AND e.session_id IS NOT ?"
            if table == "entries_fts"
            # A person's note has no session; a forgotten memory is never found (DRV-7).
            else "m.tenant = ? AND m.agent = ? AND (m.session_id IS NULL OR m.session_id IS NOT ?)"
            f" AND {LIVE}"
        )
        joins = " JOIN sessions s ON s.id = e.session_id" if table == "entries_fts" else ""
        sql = (
            f"SELECT {table}.rowid, bm25({table}) FROM {table}"
            f" JOIN {source} {alias} ON {alias}.id = {table}.rowid{joins}"
            f" WHERE {table} MATCH ? AND {scoped} ORDER BY rank LIMIT ?"
        )
        # The ledger's one time bound (Db.bounded: the progress handler stops a runaway match
        # near its budget), so a bound the caller set already is never lifted by this one.
        try:
            with db.bounded(budget_s), db.reading() as c:
                try:
                    rows = c.execute(sql, (query, tenant, agent, exclude, limit)).fetchall()
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorname == "SQLITE_INTERRUPT":
                        raise  # the bound: LedgerTimeout, from reading()
                    raise UserError(f"bad full-text query {query!r}: {exc}") from exc
                except UnicodeEncodeError as exc:
                    raise UserError(f"bad full-text query {query!r}: {exc}") from exc
        except LedgerTimeout:
            raise MemorySearchTimeout(
                f"the search ran past its {budget_s:g} s budget and was stopped; search "
                "fewer or rarer words"
            ) from None
        return [(int(r[0]), -float(r[1])) for r in rows]  # bm25 is lower-is-better

    def forget_text(self, db: Db, session: str) -> None:
        forget_session(db, session)

    def rebuild_search_index(self, db: Db) -> None:
        rebuild(db)

    def search_check(self, db: Db) -> list[str]:
        with db.reading() as c:
            return search_check(c)

    def database_check(self, db: Db) -> tuple[str, list[str]]:
        """SQLite's full ``integrity_check`` (pages, b-trees, every index against its table),
        the schema against the migrations' and each full-text index's own check."""
        problems: list[str] = []
        with db.reading() as c:
            rows = [str(r[0]) for r in c.execute("PRAGMA integrity_check(100)")]
            if rows != ["ok"]:
                problems += rows
            problems += _schema_problems(c)
            for fts in ("entries_fts", "summaries_fts"):
                try:
                    c.execute(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')")
                except sqlite3.DatabaseError as exc:
                    problems.append(f"full-text index {fts}: {exc}")
        return ("ok" if not problems else "faults"), problems


SQLITE = SQLiteDialect()


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _schema_problems(c: Db) -> list[str]:
    """How the ledger's tables and indexes differ from those the migrations create: a damaged
    schema can still parse (a renamed column) and pass SQLite's own check."""
    ref = Db(sqlite3.connect(":memory:", isolation_level=None), SQLITE, ":memory:")
    try:
        for m in MIGRATIONS:
            SQLITE.run_script(ref, m.statements(SQLITE))
        problems: list[str] = []
        for kind, name, sql in ref.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall():
            found = c.execute("SELECT type, sql FROM sqlite_master WHERE name = ?", (name,))
            have = found.fetchone()
            if have is None or have[0] != kind:
                problems.append(f"schema: {kind} {name} is missing")
            elif kind == "index" and " ".join(str(have[1]).split()) != " ".join(sql.split()):
                problems.append(f"schema: index {name} is not the one comal creates")
            elif kind == "table":
                columns = 'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)'
                want = set(ref.execute(columns, (name,)).fetchall())
                lost = want - set(c.execute(columns, (name,)).fetchall())
                if lost:
                    shown = ", ".join(sorted(str(col[0]) for col in lost))
                    problems.append(f"schema: table {name} lacks or changed columns {shown}")
        return problems
    finally:
        ref.close()


class SQLiteLedger(Store):
    """The ledger in one SQLite file. Open one with :func:`~comal.ledger.open_ledger`;
    ``create=False`` opens only an existing ledger, ``secret`` keys its seals instead of its
    key file (see ``_seal``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        counter: TokenCounter | None = None,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
        secret: Secret | None = None,
        compress: bool = True,
        strict: bool = True,
    ) -> None:
        """``compress=False`` stores every body as text, as comal did before bodies were
        compressed (both read the same; it is there to measure what compression saves).
        ``strict=False`` opens a ledger whose seals cannot be checked or that is older than
        this machine last saw it, to report on it (see :func:`~comal.ledger.open_ledger`)."""
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise UserError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        parsed = parse_target(path)  # a sqlite: or mysql:// URL must not become a folder
        if parsed.kind != "sqlite":
            raise LedgerBadTarget(
                parsed.described,
                "a PostgreSQL URL, not an SQLite ledger file",
                "open it with open_ledger (or PostgresLedger)",
            )
        self.path = parsed.value
        memory = self.path == ":memory:"
        target = parsed.described
        place = None if memory else os.path.realpath(self.path)
        keying = Keying("sqlite", target, secret, memory, strict=strict, place=place)
        db = open_sqlite(self.path, SQLITE, create=create, target=target, keying=keying)
        db.raw.execute(f"PRAGMA synchronous = {synchronous}")  # cannot fail: a fixed word
        super().__init__(db, keying, counter)
        self._packs = compress
        self._gate = None if memory else WriterGate.beside(self.path)
        db.gate = self._gate

    def close(self) -> None:
        super().close()
        if self._gate is not None:
            self._gate.close()

    def index_text(self, *, batch: int = 2000) -> int:
        """Bring the full-text index up to date; returns how many entries were indexed (a
        search does this first by itself)."""
        return SQLITE.catch_up(self._db, batch)

    def session_lock(self, scope: Scope) -> SessionLock:
        """Take the session's lock (RES-2): a file lock beside the ledger, ``<ledger>.locks/
        <session>.lock``; :class:`~comal.ledger.SessionLocked` while a live process holds it.
        ``lock.stale`` is what a dead holder left, when one was cleared."""
        if self.path == ":memory:":
            raise UserError(
                "a session lock needs a ledger file (an in-memory ledger is private to its "
                "process); open the ledger from a path"
            )
        lock = SessionLock(lock_path(self.path, scope.session), scope.session)
        lock.acquire()
        return lock

    def session_lock_holder(self, scope: Scope) -> dict[str, Any] | None:
        """What the live holder of the session's lock wrote in it, read without taking it: a
        hint, the holder may let go a moment later; ``None``: nobody holds it."""
        if self.path == ":memory:":
            return None
        return lock_holder(lock_path(self.path, scope.session))
