"""Named migrations. Each runs in one transaction together with its "applied" record, so a crash
mid-migration leaves the previous schema. ``PRAGMA user_version`` mirrors the count, letting an
older comal refuse a database written by a newer one.

Before anything is migrated, :func:`inspect` says what the file holds: nothing yet (``empty``), a
comal ledger (and which migrations it lacks), or something else — another program's database,
which is refused without a single write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from ..errors import SchemaVersionError
from ._errors import LedgerForeign
from ._hardening import backfill
from ._keys import KEYS_DDL
from ._savings import SAVINGS, backfill_savings
from ._savings import SQLITE_DDL as SAVINGS_SQLITE
from ._sql import HARDENING, SQLITE

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            tenant TEXT NOT NULL,
            agent TEXT NOT NULL,
            parent TEXT REFERENCES sessions(id),
            status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'finished')),
            created_at TEXT NOT NULL,
            next_seq INTEGER NOT NULL DEFAULT 0,
            entry_count INTEGER NOT NULL DEFAULT 0,
            token_total INTEGER NOT NULL DEFAULT 0,
            title TEXT,
            source TEXT,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX sessions_scope ON sessions (tenant, agent, created_at);
        CREATE INDEX sessions_parent ON sessions (parent);

        -- Small columns first and a covering index: budgeting sums tokens without reading bodies.
        CREATE TABLE entries (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            step INTEGER NOT NULL,
            role TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            size INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            call_id TEXT,
            digest TEXT NOT NULL,
            output_digest TEXT,
            body TEXT NOT NULL,
            UNIQUE (session_id, seq)
        );
        CREATE INDEX entries_budget ON entries (session_id, seq, tokens, step, role, id);
        CREATE INDEX entries_call ON entries (session_id, call_id) WHERE call_id IS NOT NULL;

        -- The full-text index trails the entries: appends stay fast, and every search first
        -- indexes what was appended since (fts_state.upto is the highest indexed entry id).
        CREATE VIRTUAL TABLE entries_fts USING fts5 (text, content='', tokenize='unicode61');
        CREATE TABLE fts_state (name TEXT PRIMARY KEY, upto INTEGER NOT NULL);
        INSERT INTO fts_state (name, upto) VALUES ('entries', 0);

        CREATE TABLE requests (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            entry_id INTEGER REFERENCES entries(id),
            model TEXT,
            protocol TEXT,
            new_input INTEGER,
            cache_read INTEGER,
            cache_write INTEGER,
            output INTEGER,
            reasoning INTEGER,
            created_at TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX requests_session ON requests (session_id, id);

        CREATE TABLE checkpoints (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            digest TEXT NOT NULL,
            body TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            CHECK (first_seq <= last_seq)
        );
        CREATE INDEX checkpoints_session ON checkpoints (session_id, last_seq);

        -- Receipts, summaries and events share one shape: a kind, a JSON body and its digest.
        CREATE TABLE records (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            table_name TEXT NOT NULL
                CHECK (table_name IN ('receipt', 'summary', 'event', 'preparation')),
            kind TEXT NOT NULL,
            created_at TEXT NOT NULL,
            digest TEXT NOT NULL,
            body TEXT NOT NULL
        );
        CREATE INDEX records_session ON records (session_id, table_name, id);
        CREATE VIRTUAL TABLE summaries_fts USING fts5 (text, content='', tokenize='unicode61');
        """,
    ),
    ("0002_proxy_keys", KEYS_DDL),
    (
        HARDENING,
        """
        ALTER TABLE sessions ADD COLUMN last_step INTEGER;
        ALTER TABLE sessions ADD COLUMN seal TEXT;
        ALTER TABLE entries ADD COLUMN seal TEXT;
        ALTER TABLE requests ADD COLUMN tenant TEXT;
        ALTER TABLE requests ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE requests ADD COLUMN run TEXT;
        ALTER TABLE requests ADD COLUMN spent_at TEXT;
        ALTER TABLE requests ADD COLUMN prompt_last_seq INTEGER;
        ALTER TABLE requests ADD COLUMN seal TEXT;
        ALTER TABLE checkpoints ADD COLUMN seal TEXT;
        ALTER TABLE records ADD COLUMN seal TEXT;

        -- The spend guard's windows and runs are index ranges (covering: tokens is in the
        -- index); imported usage has no time and no run, so it is not in them at all.
        CREATE INDEX requests_spend ON requests (tenant, spent_at, tokens)
            WHERE spent_at IS NOT NULL;
        CREATE INDEX requests_run ON requests (tenant, run, tokens) WHERE run IS NOT NULL;
        -- The newest request that can anchor an estimate (TOK-2): one index step.
        CREATE INDEX requests_anchor ON requests (session_id, id)
            WHERE entry_id IS NOT NULL AND new_input IS NOT NULL
            AND prompt_last_seq IS NOT NULL;
        CREATE INDEX records_kind ON records (session_id, table_name, kind, id);
        -- The foreign key's child side: deleting entries must not scan every request.
        CREATE INDEX requests_entry ON requests (entry_id);

        -- What delete_session leaves behind: the only deletion there is, recorded.
        CREATE TABLE deletions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            tenant TEXT NOT NULL,
            agent TEXT NOT NULL,
            parent TEXT,
            title TEXT,
            created_at TEXT NOT NULL,
            deleted_at TEXT NOT NULL,
            deleted_by TEXT,
            entries INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            row_counts TEXT NOT NULL,
            digest TEXT NOT NULL,
            seal TEXT NOT NULL
        );
        CREATE INDEX deletions_session ON deletions (session_id);
        CREATE INDEX deletions_tenant ON deletions (tenant, id);

        -- Running spend totals, kept with each request in its transaction, so the spend guard
        -- reads a bounded number of rows however long the session or run: per run, and per
        -- minute of meta.at (a day is at most 1,440 rows).
        CREATE TABLE spend_runs (
            tenant TEXT NOT NULL,
            run TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (tenant, run)
        ) WITHOUT ROWID;
        CREATE TABLE spend_minutes (
            tenant TEXT NOT NULL,
            minute TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (tenant, minute)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "0004_dag_summaries",
        """
        -- The dag engine's summary nodes (see ledger/_summaries.py for the rules they keep).
        CREATE TABLE summaries (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            depth INTEGER NOT NULL CHECK (depth >= 0),
            kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            descendant_count INTEGER NOT NULL,
            descendant_tokens INTEGER NOT NULL,
            time_start TEXT NOT NULL,
            time_end TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            level TEXT NOT NULL CHECK (level IN ('normal', 'aggressive', 'count-only')),
            digest TEXT NOT NULL,
            created_at TEXT NOT NULL,
            body TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            sources_digest TEXT NOT NULL,
            -- The frontier (JSON ids, oldest first) once this row is stored: the newest row of
            -- a session names its frontier, so reading it costs O(log n) rows, not a scan.
            frontier TEXT NOT NULL,
            CHECK (first_seq <= last_seq),
            CHECK ((kind = 'leaf') = (depth = 0))
        );
        CREATE INDEX summaries_session ON summaries (session_id, first_seq);
        CREATE INDEX summaries_latest ON summaries (session_id, id);
        CREATE UNIQUE INDEX summaries_leaf_start ON summaries (session_id, first_seq)
            WHERE kind = 'leaf';
        -- A child is condensed at most once: the unique child_id is the DAG's own guard.
        CREATE TABLE summary_children (
            parent_id INTEGER NOT NULL REFERENCES summaries(id),
            child_id INTEGER NOT NULL UNIQUE REFERENCES summaries(id),
            position INTEGER NOT NULL,
            PRIMARY KEY (parent_id, position)
        );
        CREATE VIRTUAL TABLE summaries_text_fts USING fts5 (text, content='', tokenize='unicode61');
        -- Coordination rows (epoch seconds): the single-flight compaction lease per session,
        -- summarizer spend per tenant, and the per-tenant summarizer circuit breaker.
        CREATE TABLE compaction_leases (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id),
            owner TEXT NOT NULL,
            acquired_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE TABLE summarizer_spend (
            id INTEGER PRIMARY KEY,
            tenant TEXT NOT NULL,
            session_id TEXT NOT NULL REFERENCES sessions(id),
            at REAL NOT NULL,
            tokens INTEGER NOT NULL,
            summarizer TEXT NOT NULL
        );
        CREATE INDEX summarizer_spend_tenant ON summarizer_spend (tenant, at);
        CREATE TABLE summarizer_breaker (
            tenant TEXT PRIMARY KEY,
            failures INTEGER NOT NULL,
            opened_at REAL,
            trial_at REAL,
            updated_at REAL NOT NULL
        );
        """,
    ),
    (SAVINGS, SAVINGS_SQLITE),
)

SCHEMA_VERSION = len(MIGRATIONS)

# Python steps run inside a migration's transaction, after its DDL.
BACKFILLS: dict[str, Callable[[sqlite3.Connection], None]] = {
    HARDENING: lambda conn: backfill(conn, SQLITE),
    SAVINGS: lambda conn: backfill_savings(conn, SQLITE.q),
}
FIRST = MIGRATIONS[0][0]

State = Literal["empty", "ledger"]


def inspect(conn: sqlite3.Connection, target: str) -> tuple[State, list[str]]:
    """What the database holds, read without writing: ``empty``, or ``ledger`` with the names of
    the migrations it still needs. Another program's database raises :class:`LedgerForeign`,
    one written by a newer comal :class:`SchemaVersionError`."""
    tables = sorted(
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            " AND name NOT LIKE 'sqlite_%'"
        )
    )
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if not tables and version == 0:
        return "empty", [name for name, _ in MIGRATIONS]
    applied: set[str] = set()
    if "schema_migrations" in tables:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")}
        if "name" in columns:
            applied = {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}
    if FIRST not in applied:
        shown = ", ".join(tables[:6]) + (", ..." if len(tables) > 6 else "")
        raise LedgerForeign(
            target,
            f"this SQLite database is not a comal ledger (it holds {shown or 'no tables'}, and no "
            "comal migrations); it was left untouched",
            "check the path (or COMAL_LEDGER), or give a new file name to start a ledger",
        )
    known = {name for name, _ in MIGRATIONS}
    if version > SCHEMA_VERSION or applied - known:
        raise SchemaVersionError(
            f"{target}: ledger schema version {max(version, len(applied))} is newer than this "
            f"comal's ({SCHEMA_VERSION}); upgrade comal to open it"
        )
    return "ledger", [name for name, _ in MIGRATIONS if name not in applied]


def schema_problems(conn: sqlite3.Connection) -> list[str]:
    """How the ledger's tables and indexes differ from those the migrations create: a damaged
    schema can still parse (a renamed column) and pass SQLite's own check."""
    ref = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(ref)
        problems: list[str] = []
        for kind, name, sql in ref.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall():
            found = conn.execute(
                "SELECT type, sql FROM sqlite_master WHERE name = ?", (name,)
            ).fetchone()
            if found is None or found[0] != kind:
                problems.append(f"schema: {kind} {name} is missing")
            elif kind == "index" and found[1] != sql:
                problems.append(f"schema: index {name} is not the one comal creates")
            elif kind == "table":
                columns = 'SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)'
                want = set(ref.execute(columns, (name,)).fetchall())
                have = set(conn.execute(columns, (name,)).fetchall())
                if not want <= have:
                    lost = ", ".join(sorted(str(c[0]) for c in want - have))
                    problems.append(f"schema: table {name} lacks or changed columns {lost}")
        return problems
    finally:
        ref.close()


def migrate(conn: sqlite3.Connection, pending: list[str] | None = None) -> None:
    """Apply the migrations not yet recorded, each in its own transaction."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    applied = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    for name, sql in MIGRATIONS:
        if name in applied or (pending is not None and name not in pending):
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(sql):
                conn.execute(statement)
            step = BACKFILLS.get(name)
            if step is not None:
                step(conn)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat()),
            )
            applied.add(name)
            # The count of applied migrations, whatever order they were merged in.
            conn.execute(f"PRAGMA user_version = {len(applied)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _statements(sql: str) -> list[str]:
    # executescript would commit implicitly; split so each migration stays one transaction.
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
