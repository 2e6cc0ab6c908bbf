"""Named migrations. Each runs in one transaction together with its "applied" record, so a crash
mid-migration leaves the previous schema. ``PRAGMA user_version`` mirrors the count, letting an
older comal refuse a database written by a newer one."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from ..errors import SchemaVersionError

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
    (
        "0002_dag_summaries",
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
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"ledger schema version {version} is newer than this comal's ({SCHEMA_VERSION}); "
            "upgrade comal to open it"
        )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
    )
    applied = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    for index, (name, sql) in enumerate(MIGRATIONS, start=1):
        if name in applied:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat()),
            )
            conn.execute(f"PRAGMA user_version = {index}")
            conn.execute("COMMIT")
        except BaseException:
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
