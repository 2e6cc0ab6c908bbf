"""Opening a PostgreSQL ledger: the connection, its schema, and naming what went wrong.

The connection is in autocommit mode and every transaction is an explicit statement
(:class:`~._db.Db`). ``schema`` places the ledger in a PostgreSQL schema of its own, created if
missing (and allowed); without it the connection's ``search_path`` decides. Every ``psycopg``
error becomes a coded :class:`~comal.errors.LedgerError` through :func:`translate`, whose message
never holds the password.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.pq import TransactionStatus

from ..errors import LedgerError, UserError
from ._db import Db
from ._dialect import Dialect
from ._errors import (
    LedgerBadTarget,
    LedgerBusy,
    LedgerCorrupt,
    LedgerNotFound,
    LedgerReadOnly,
    LedgerTimeout,
    LedgerUnavailable,
)
from ._migrate import migrate, pending
from ._seal import Keying
from ._target import redact

# Migrations of one schema take turns: two processes opening a fresh ledger must not both run DDL.
LOCK_CLASS = 0x636F6D61  # "coma"


def connect(url: str, target: str, password: str | None) -> Any:
    try:
        conn = psycopg.connect(url, autocommit=True, client_encoding="UTF8")
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


def translate(exc: BaseException, target: str, password: str | None, doing: str) -> LedgerError:
    """A coded error for a ``psycopg`` failure; the message never holds the password."""
    text = redact(_first_line(exc), password)
    state = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.ReadOnlySqlTransaction):
        return LedgerReadOnly(
            target,
            f"cannot write while {doing} ({text})",
            "grant the ledger's role write access to its schema and tables, or use one that has it",
        )
    if isinstance(exc, pg_errors.QueryCanceled):  # statement_timeout: Db.bounded's bound
        return LedgerTimeout(
            target,
            f"the query ran past the time bound it was given while {doing}",
            "narrow it (more specific words, a phrase, a smaller limit) and try again",
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


def reconnect(url: str, target: str, password: str | None, schema: str | None) -> Any:
    """A new connection in place of a lost one, pointed at the ledger's schema as the first was
    (the schema exists and is migrated: :func:`prepare` ran on the first)."""
    conn = connect(url, target, password)
    if schema is not None:
        try:
            quoted = sql.Identifier(schema).as_string(conn)
            conn.execute("SELECT set_config('search_path', %s, false)", (quoted,))
        except psycopg.Error as exc:
            conn.close()
            raise translate(exc, target, password, "reconnecting") from exc
    return conn


def prepare(db: Db, schema: str | None, keying: Keying, *, create: bool) -> None:
    """Point the connection at ``schema`` (created if missing and ``create``) and migrate it.

    Without ``create`` nothing is created: a schema or database without a ledger is
    :class:`LedgerNotFound`. Tables of another program where the ledger's would go are
    :class:`~comal.ledger.LedgerForeign`, and left alone.
    """
    if schema is not None:
        quoted = sql.Identifier(schema).as_string(db.raw)
        with db.atomic():
            db.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (LOCK_CLASS, schema))
            # Probe first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when
            # the schema is there, and a ledger user may only own its schema.
            if db.execute("SELECT to_regnamespace(?)", (quoted,)).fetchone() == (None,):
                if not create:
                    raise LedgerNotFound(
                        db.target,
                        f"the database has no schema {schema!r}, so no ledger",
                        "check the schema name; commands that write create a ledger",
                    )
                db.execute(f"CREATE SCHEMA {quoted}")
            # Session-wide (is_local false) and kept because this transaction commits.
            db.execute("SELECT set_config('search_path', ?, false)", (quoted,))
    with db.reading():
        if db.execute("SELECT current_schema()").fetchone() == (None,):
            raise UserError(
                "the PostgreSQL search_path names no existing schema to hold the ledger; "
                "pass schema=... (it is created) or fix the role's search_path"
            )
        found = pending(db)
    if found is None and not create:
        raise LedgerNotFound(
            db.target,
            "there is no ledger in this database (schema)",
            "check the URL and schema; commands that write create a ledger",
        )
    if found != []:  # nothing to write otherwise: a read-only role can open an up-to-date ledger
        migrate(db, keying, found)


class PgDialectBase(Dialect):
    """What PostgreSQL's dialect needs for opening and migrating (the rest is in _postgres)."""

    name = "postgres"
    placeholder = "%s"
    begin = "BEGIN"
    for_update = " FOR UPDATE"
    budget_index = ""
    lazy_cursor = False  # psycopg's client-side cursor holds the whole result
    packs_bodies = False  # TOAST compresses large text at rest already
    errors = (psycopg.Error,)
    types: ClassVar[Mapping[str, str]] = {
        "pk": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "key": 'TEXT COLLATE "C"',
        "int": "BIGINT",
        "real": "DOUBLE PRECISION",
        "entries_key": "CONSTRAINT entries_budget UNIQUE (session_id, seq) INCLUDE (tokens, step,"
        " role, id)",
        "rowless": "",
    }
    place = "PostgreSQL schema"
    overriding = " OVERRIDING SYSTEM VALUE"
    foreign_todo = (
        "give the ledger a schema of its own (pass schema=..., or options=-csearch_path=...)"
    )

    def __init__(self, password: str | None = None) -> None:
        self.password = password

    def translate(self, exc: BaseException, target: str, doing: str) -> LedgerError:
        return translate(exc, target, self.password, doing)

    def in_transaction(self, raw: Any) -> bool:
        return bool(raw.info.transaction_status != TransactionStatus.IDLE)

    def broken(self, raw: Any) -> bool:
        return bool(raw.closed or raw.broken)

    def run_script(self, db: Db, sql: str) -> None:
        db.execute(sql)  # no parameters: psycopg sends it as one multi-statement query

    def tables(self, db: Db) -> set[str]:
        rows = db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return {r[0] for r in rows.fetchall()}

    def columns(self, db: Db, table: str) -> set[str]:
        rows = db.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
        return {r[0] for r in rows.fetchall()}

    def lock_migrations(self, db: Db) -> None:
        db.execute("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", (LOCK_CLASS,))

    def migrated(self, db: Db, applied: int) -> None:
        """Nothing: a PostgreSQL ledger's version is the migrations it records."""

    def ids_column(self, table: str, n: int) -> str:
        # From the identity column's own sequence: concurrent writers never share an id, and
        # the ids a rolled-back write (or a FOR UPDATE that waited and looked again) took are
        # skipped, as any identity's are.
        return (
            f"ARRAY(SELECT nextval(pg_get_serial_sequence('{table}', 'id'))"
            f" FROM generate_series(1, {int(n)}))"
        )

    def ids_of(self, value: Any, n: int) -> list[int]:
        return sorted(int(v) for v in value)

    def session_tables(self, db: Db) -> list[str]:
        rows = db.execute(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND column_name = 'session_id'"
            " ORDER BY table_name"
        )
        return [r[0] for r in rows.fetchall()]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
