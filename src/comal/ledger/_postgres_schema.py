"""The PostgreSQL ledger's schema and search representation (LED-4, LED-5).

Migrations carry the same names as SQLite's and are recorded in ``schema_migrations`` the same
way; PostgreSQL has no ``user_version``, so a database is "newer" when it records a migration this
comal does not know. Bodies and meta stay TEXT holding the canonical JSON (not JSONB, which would
re-encode them), so digests are identical across backends. Key columns use the "C" collation so
ordering and prefix ranges compare bytes, as SQLite does, whatever the database's locale.

Full-text search indexes words, not raw text: text is lower-cased, stripped of diacritics and split
on everything that is not a letter or digit (underscore included), which is what SQLite's
``unicode61`` tokenizer does, and the words become a ``tsvector`` under a GIN index. Queries in
SQLite's FTS5 syntax are translated to a ``tsquery`` built from the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from ..errors import SchemaVersionError, UserError
from ._errors import LedgerForeign, LedgerNotFound
from ._hardening import backfill
from ._keys import KEYS_DDL
from ._savings import POSTGRES_DDL as SAVINGS_POSTGRES
from ._savings import SAVINGS, backfill_savings
from ._sql import HARDENING, POSTGRES

_ENTRIES = """
CREATE TABLE sessions (
    id TEXT COLLATE "C" PRIMARY KEY,
    tenant TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C" REFERENCES sessions(id),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'finished')),
    created_at TEXT COLLATE "C" NOT NULL,
    next_seq BIGINT NOT NULL DEFAULT 0,
    entry_count BIGINT NOT NULL DEFAULT 0,
    token_total BIGINT NOT NULL DEFAULT 0,
    title TEXT,
    source TEXT,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX sessions_scope ON sessions (tenant, agent, created_at);
CREATE INDEX sessions_parent ON sessions (parent);

-- The unique key doubles as the covering index budgeting reads: tails sum tokens from it alone.
CREATE TABLE entries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    seq BIGINT NOT NULL,
    step BIGINT NOT NULL,
    role TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    size BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    call_id TEXT,
    digest TEXT NOT NULL,
    output_digest TEXT,
    body TEXT NOT NULL,
    CONSTRAINT entries_budget UNIQUE (session_id, seq) INCLUDE (tokens, step, role, id)
);
CREATE INDEX entries_call ON entries (session_id, call_id) WHERE call_id IS NOT NULL;

-- Indexed in the append's own transaction. SQLite trails a high-water mark instead, but here
-- concurrent writers commit identity ids out of order and a mark could skip an entry forever.
-- Long texts take several rows (chunks) to stay under the tsvector size and position limits.
CREATE TABLE entries_fts (
    entry_id BIGINT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY (entry_id, chunk)
);
CREATE INDEX entries_fts_tsv ON entries_fts USING GIN (tsv);
CREATE INDEX entries_fts_session ON entries_fts (session_id);
"""

_RECORDS = """
CREATE TABLE requests (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    entry_id BIGINT REFERENCES entries(id),
    model TEXT,
    protocol TEXT,
    new_input BIGINT,
    cache_read BIGINT,
    cache_write BIGINT,
    output BIGINT,
    reasoning BIGINT,
    created_at TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX requests_session ON requests (session_id, id);

CREATE TABLE checkpoints (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    created_at TEXT NOT NULL,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    CHECK (first_seq <= last_seq)
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, last_seq);

CREATE TABLE records (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    table_name TEXT NOT NULL
        CHECK (table_name IN ('receipt', 'summary', 'event', 'preparation')),
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    digest TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX records_session ON records (session_id, table_name, id);
CREATE TABLE summaries_fts (
    record_id BIGINT NOT NULL REFERENCES records(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY (record_id, chunk)
);
CREATE INDEX summaries_fts_tsv ON summaries_fts USING GIN (tsv);
"""

_HARDENING = """
ALTER TABLE sessions ADD COLUMN last_step BIGINT, ADD COLUMN seal TEXT;
ALTER TABLE entries ADD COLUMN seal TEXT;
ALTER TABLE requests ADD COLUMN tenant TEXT COLLATE "C",
    ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0, ADD COLUMN run TEXT COLLATE "C",
    ADD COLUMN spent_at TEXT COLLATE "C", ADD COLUMN prompt_last_seq BIGINT, ADD COLUMN seal TEXT;
ALTER TABLE checkpoints ADD COLUMN seal TEXT;
ALTER TABLE records ADD COLUMN seal TEXT;

-- The spend guard's windows and runs are index ranges (tokens rides along, so the sums read the
-- index alone); imported usage has no time and no run, so it is not in them at all.
CREATE INDEX requests_spend ON requests (tenant, spent_at) INCLUDE (tokens)
    WHERE spent_at IS NOT NULL;
CREATE INDEX requests_run ON requests (tenant, run) INCLUDE (tokens) WHERE run IS NOT NULL;
-- The newest request that can anchor an estimate (TOK-2): one index step.
CREATE INDEX requests_anchor ON requests (session_id, id)
    WHERE entry_id IS NOT NULL AND new_input IS NOT NULL AND prompt_last_seq IS NOT NULL;
CREATE INDEX records_kind ON records (session_id, table_name, kind, id);
-- The foreign key's child side: deleting entries must not scan every request.
CREATE INDEX requests_entry ON requests (entry_id);

-- What delete_session leaves behind: the only deletion there is, recorded.
CREATE TABLE deletions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL,
    tenant TEXT COLLATE "C" NOT NULL,
    agent TEXT COLLATE "C" NOT NULL,
    parent TEXT COLLATE "C",
    title TEXT,
    created_at TEXT NOT NULL,
    deleted_at TEXT NOT NULL,
    deleted_by TEXT,
    entries BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    row_counts TEXT NOT NULL,
    digest TEXT NOT NULL,
    seal TEXT NOT NULL
);
CREATE INDEX deletions_session ON deletions (session_id);
CREATE INDEX deletions_tenant ON deletions (tenant, id);

-- Running spend totals, kept with each request in its transaction, so the spend guard reads a
-- bounded number of rows however long the session or run: per run, and per minute of meta.at
-- (a day is at most 1,440 rows).
CREATE TABLE spend_runs (
    tenant TEXT COLLATE "C" NOT NULL,
    run TEXT COLLATE "C" NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (tenant, run)
);
CREATE TABLE spend_minutes (
    tenant TEXT COLLATE "C" NOT NULL,
    minute TEXT COLLATE "C" NOT NULL,
    tokens BIGINT NOT NULL,
    PRIMARY KEY (tenant, minute)
);
"""

_DAG_SUMMARIES = """
CREATE TABLE summaries (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    depth INTEGER NOT NULL CHECK (depth >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    descendant_count BIGINT NOT NULL,
    descendant_tokens BIGINT NOT NULL,
    time_start TEXT NOT NULL,
    time_end TEXT NOT NULL,
    tokens BIGINT NOT NULL,
    summarizer TEXT NOT NULL,
    level TEXT NOT NULL CHECK (level IN ('normal', 'aggressive', 'count-only')),
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    sources_digest TEXT NOT NULL,
    frontier TEXT NOT NULL,
    CHECK (first_seq <= last_seq),
    CHECK ((kind = 'leaf') = (depth = 0))
);
CREATE INDEX summaries_session ON summaries (session_id, first_seq);
CREATE INDEX summaries_latest ON summaries (session_id, id);
CREATE UNIQUE INDEX summaries_leaf_start ON summaries (session_id, first_seq) WHERE kind = 'leaf';
CREATE TABLE summary_children (
    parent_id BIGINT NOT NULL REFERENCES summaries(id),
    child_id BIGINT NOT NULL UNIQUE REFERENCES summaries(id),
    position INTEGER NOT NULL,
    PRIMARY KEY (parent_id, position)
);
CREATE TABLE summaries_text_fts (
    summary_id BIGINT NOT NULL REFERENCES summaries(id),
    chunk INTEGER NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY (summary_id, chunk)
);
CREATE INDEX summaries_text_fts_tsv ON summaries_text_fts USING GIN (tsv);
CREATE TABLE compaction_leases (
    session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions(id),
    owner TEXT NOT NULL,
    acquired_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE summarizer_spend (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant TEXT COLLATE "C" NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    at DOUBLE PRECISION NOT NULL,
    tokens BIGINT NOT NULL,
    summarizer TEXT NOT NULL
);
CREATE INDEX summarizer_spend_tenant ON summarizer_spend (tenant, at);
CREATE TABLE summarizer_breaker (
    tenant TEXT COLLATE "C" PRIMARY KEY,
    failures INTEGER NOT NULL,
    opened_at DOUBLE PRECISION,
    trial_at DOUBLE PRECISION,
    updated_at DOUBLE PRECISION NOT NULL
);
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_initial", _ENTRIES + _RECORDS),
    ("0002_proxy_keys", KEYS_DDL),
    (HARDENING, _HARDENING),
    ("0004_dag_summaries", _DAG_SUMMARIES),
    (SAVINGS, SAVINGS_POSTGRES),
)
SCHEMA_VERSION = len(MIGRATIONS)  # the names match SQLite's one for one (a test pins it)

# Python steps run inside a migration's transaction, after its DDL.
BACKFILLS: dict[str, Callable[[psycopg.Connection[Any]], None]] = {
    HARDENING: lambda conn: backfill(conn, POSTGRES),
    SAVINGS: lambda conn: backfill_savings(conn, POSTGRES.q),
}
_FIRST = MIGRATIONS[0][0]
_LEDGER_TABLES = frozenset({"sessions", "entries", "requests", "checkpoints", "records"})

# Migrations of one schema take turns: two processes opening a fresh ledger must not both run DDL.
_LOCK_CLASS = 0x636F6D61  # "coma"


def prepare_schema(
    conn: psycopg.Connection[Any], schema: str | None, *, create: bool = True, target: str = ""
) -> None:
    """Point the connection at ``schema`` (created if missing and ``create``) and migrate it.

    Without ``create`` nothing is created: a schema or database without a ledger is
    :class:`LedgerNotFound`. Tables of another program where the ledger's would go are
    :class:`LedgerForeign`, and left alone.
    """
    if schema is not None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, schema))
            # Probe first: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when
            # the schema is there, and a ledger user may only own its schema.
            found = conn.execute("SELECT to_regnamespace(%s)", (_quoted(conn, schema),))
            if found.fetchone() == (None,):
                if not create:
                    raise LedgerNotFound(
                        target,
                        f"the database has no schema {schema!r}, so no ledger",
                        "check the schema name; commands that write create a ledger",
                    )
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            # Session-wide (is_local false) and kept because this transaction commits.
            conn.execute("SELECT set_config('search_path', %s, false)", (_quoted(conn, schema),))
    _migrate(conn, create=create, target=target)


def _quoted(conn: psycopg.Connection[Any], schema: str) -> str:
    return sql.Identifier(schema).as_string(conn)


def _pending(conn: psycopg.Connection[Any], target: str) -> list[str] | None:
    """The migrations the current schema lacks; None when it holds no ledger at all."""
    tables = {
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    }
    applied: set[str] = set()
    if "schema_migrations" in tables:
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = 'schema_migrations'"
            ).fetchall()
        }
        if "name" in columns:
            applied = {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}
    elif not tables & _LEDGER_TABLES:
        return None
    if _FIRST not in applied:
        shown = ", ".join(sorted(tables & (_LEDGER_TABLES | {"schema_migrations"})))
        raise LedgerForeign(
            target,
            f"the schema holds tables a ledger would use ({shown}) but no comal migrations: "
            "they belong to another program and were left untouched",
            "give the ledger a schema of its own (pass schema=..., or options=-csearch_path=...)",
        )
    unknown = applied - {n for n, _ in MIGRATIONS}
    if unknown:
        raise SchemaVersionError(
            f"{target}: ledger schema version {len(applied)} is newer than this comal's "
            f"({SCHEMA_VERSION}): it records migrations {sorted(unknown)}; upgrade comal to open it"
        )
    return [n for n, _ in MIGRATIONS if n not in applied]


def _migrate(conn: psycopg.Connection[Any], *, create: bool = True, target: str = "") -> None:
    with conn.transaction():
        if conn.execute("SELECT current_schema()").fetchone() == (None,):
            raise UserError(
                "the PostgreSQL search_path names no existing schema to hold the ledger; "
                "pass schema=... (it is created) or fix the role's search_path"
            )
        pending = _pending(conn, target)
    if pending is None and not create:
        raise LedgerNotFound(
            target,
            "there is no ledger in this database (schema)",
            "check the URL and schema; commands that write create a ledger",
        )
    if pending == []:
        return  # nothing to write: a read-only role can open an up-to-date ledger
    for name, ddl in MIGRATIONS:
        # One transaction per migration, together with its "applied" record, as in SQLite.
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(current_schema()))", (_LOCK_CLASS,)
            )
            found = _pending(conn, target)  # again, under the lock: another process may have won
            if found is not None and name not in found:
                continue
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY,"
                " applied_at TEXT)"
            )
            conn.execute(ddl)  # no parameters: psycopg sends it as one multi-statement query
            step = BACKFILLS.get(name)
            if step is not None:
                step(conn)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)",
                (name, datetime.now(UTC).isoformat()),
            )
