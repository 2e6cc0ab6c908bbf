"""The one migration runner. Each migration runs in one transaction together with its "applied"
record in ``schema_migrations``, so a crash mid-migration leaves the previous schema; concurrent
openers take turns (SQLite's write lock, PostgreSQL's advisory lock) and look again before
applying. SQLite's ``PRAGMA user_version`` mirrors the count, so an older comal refuses a newer
file; on PostgreSQL a ledger is newer when it records a migration this comal does not know.

Before anything is migrated, :func:`pending` says what the database holds, read without writing:
no ledger yet, a comal ledger (and which migrations it lacks), or something else — another
program's tables, refused without a single write.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import SchemaVersionError
from ._backfill import key_and_chain
from ._errors import LedgerForeign
from ._reseal import migration_sealer, seal_identity
from ._schema import MIGRATIONS, SCHEMA_VERSION
from ._seal import Keying

if TYPE_CHECKING:
    from ._db import Db

_FIRST = MIGRATIONS[0].name
_LEDGER_TABLES = frozenset({"sessions", "entries", "requests", "checkpoints", "records"})


def pending(db: Db) -> list[str] | None:
    """The migrations the ledger lacks; None when there is no ledger here at all.

    SQLite owns its file, so any table there without comal's migrations makes it another
    program's; a PostgreSQL schema may hold other tables beside a ledger, so only tables a ledger
    would use do.
    """
    tables = db.dialect.tables(db)
    version = db.dialect.version(db)
    applied: set[str] = set()
    if "schema_migrations" in tables:
        columns = db.dialect.columns(db, "schema_migrations")
        if "name" in columns:
            applied = {str(r[0]) for r in db.execute("SELECT name FROM schema_migrations")}
    theirs = tables if db.dialect.name == "sqlite" else tables & _LEDGER_TABLES
    if "schema_migrations" in tables:
        theirs = theirs | {"schema_migrations"}
    if _FIRST not in applied:
        if not theirs and version == 0:
            return None
        shown = ", ".join(sorted(theirs)[:6]) + (", ..." if len(theirs) > 6 else "")
        raise LedgerForeign(
            db.target,
            f"this {db.dialect.place} is not a comal ledger (it holds {shown or 'no tables'}, and "
            "no comal migrations); it was left untouched",
            db.dialect.foreign_todo,
        )
    unknown = applied - {m.name for m in MIGRATIONS}
    if version > SCHEMA_VERSION or unknown:
        records = f" (it records migrations {sorted(unknown)})" if unknown else ""
        raise SchemaVersionError(
            f"{db.target}: ledger schema version {max(version, len(applied))} is newer than this "
            f"comal's ({SCHEMA_VERSION}){records}; upgrade comal to open it"
        )
    return [m.name for m in MIGRATIONS if m.name not in applied]


def migrate(db: Db, keying: Keying, names: list[str] | None = None) -> None:
    """Apply the migrations not yet recorded (``names``, as :func:`pending` found them; None:
    all), each in its own transaction."""
    todo = [m for m in MIGRATIONS if names is None or m.name in names]
    if any(m.backfill is key_and_chain for m in todo):
        keying.check()
    elif any(m.backfill is seal_identity for m in todo):
        # Resealing needs the ledger's own secret: refused before any migration runs.
        with db.reading():
            migration_sealer(db, keying, "reseal its rows with their ids (a migration)")
    for m in MIGRATIONS:
        with db.atomic():
            db.dialect.lock_migrations(db)
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY,"
                " applied_at TEXT)"
            )
            applied = {r[0] for r in db.execute("SELECT name FROM schema_migrations")}
            if m.name in applied:
                continue  # applied before, or just now by another process
            db.dialect.run_script(db, m.statements(db.dialect))
            if m.backfill is not None:
                m.backfill(db, keying)
            db.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                (m.name, datetime.now(UTC).isoformat()),
            )
            db.dialect.migrated(db, len(applied) + 1)


def statements(sql: str) -> list[str]:
    """``sql`` split into statements, comments dropped (a driver runs one at a time)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
