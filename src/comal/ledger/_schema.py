"""The ledger's migrations: one list for both backends, each named, each applied once.

A migration's ``ddl`` is written once with a few type tokens a dialect spells (``{pk}`` an id
column, ``{key}`` text that compares bytewise, ``{int}`` a 64-bit integer, ``{real}`` a double,
``{entries_key}`` and ``{rowless}`` where the two differ in a table's shape); what cannot be
shared at all (the full-text tables, indexes that cover with ``INCLUDE``) is in ``sqlite`` and
``postgres``. ``backfill`` runs in the migration's transaction after its DDL. The runner is
:mod:`._migrate`.

Bodies and meta stay TEXT holding the canonical JSON (not JSONB, which would re-encode them), so
digests are identical across backends; key columns compare bytes on PostgreSQL too (the "C"
collation), so ordering and prefix ranges agree with SQLite whatever the database's locale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._backfill import harden, key_and_chain
from ._keys import KEYS_DDL
from ._reseal import seal_identity
from ._savings import backfill_savings

if TYPE_CHECKING:
    from ._db import Db
    from ._dialect import Dialect


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    ddl: str
    sqlite: str = ""
    postgres: str = ""
    backfill: Callable[[Db, Any], None] | None = None

    def statements(self, dialect: Dialect) -> str:
        """This migration's DDL in ``dialect``."""
        own = self.sqlite if dialect.name == "sqlite" else self.postgres
        return dialect.ddl(self.ddl) + own


_INITIAL = """
CREATE TABLE sessions (
    id {key} PRIMARY KEY,
    tenant {key} NOT NULL,
    agent {key} NOT NULL,
    parent {key} REFERENCES sessions(id),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'finished')),
    created_at {key} NOT NULL,
    next_seq {int} NOT NULL DEFAULT 0,
    entry_count {int} NOT NULL DEFAULT 0,
    token_total {int} NOT NULL DEFAULT 0,
    title TEXT,
    source TEXT,
    meta TEXT NOT NULL DEFAULT '{{}}'
);
CREATE INDEX sessions_scope ON sessions (tenant, agent, created_at);
CREATE INDEX sessions_parent ON sessions (parent);

-- Small columns first, and a covering index: budgeting sums tokens without reading bodies.
CREATE TABLE entries (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    seq {int} NOT NULL,
    step {int} NOT NULL,
    role TEXT NOT NULL,
    tokens {int} NOT NULL,
    size {int} NOT NULL,
    created_at TEXT NOT NULL,
    call_id TEXT,
    digest TEXT NOT NULL,
    output_digest TEXT,
    body TEXT NOT NULL,
    {entries_key}
);
CREATE INDEX entries_call ON entries (session_id, call_id) WHERE call_id IS NOT NULL;

CREATE TABLE requests (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    entry_id {int} REFERENCES entries(id),
    model TEXT,
    protocol TEXT,
    new_input {int},
    cache_read {int},
    cache_write {int},
    output {int},
    reasoning {int},
    created_at TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{{}}'
);
CREATE INDEX requests_session ON requests (session_id, id);

CREATE TABLE checkpoints (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    first_seq {int} NOT NULL,
    last_seq {int} NOT NULL,
    tokens {int} NOT NULL,
    created_at TEXT NOT NULL,
    digest TEXT NOT NULL,
    body TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{{}}',
    CHECK (first_seq <= last_seq)
);
CREATE INDEX checkpoints_session ON checkpoints (session_id, last_seq);

-- Receipts, summaries and events share one shape: a kind, a JSON body and its digest.
CREATE TABLE records (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    table_name TEXT NOT NULL
        CHECK (table_name IN ('receipt', 'summary', 'event', 'preparation')),
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    digest TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX records_session ON records (session_id, table_name, id);
"""

# SQLite's entries index trails the entries: appends stay fast, and every search first indexes
# what was appended since (fts_state.upto is the highest indexed entry id). Its FTS5 tables hold
# only postings.
_INITIAL_SQLITE = """
CREATE INDEX entries_budget ON entries (session_id, seq, tokens, step, role, id);
CREATE VIRTUAL TABLE entries_fts USING fts5 (text, content='', tokenize='unicode61');
CREATE TABLE fts_state (name TEXT PRIMARY KEY, upto INTEGER NOT NULL);
INSERT INTO fts_state (name, upto) VALUES ('entries', 0);
CREATE VIRTUAL TABLE summaries_fts USING fts5 (text, content='', tokenize='unicode61');
"""


def _pg_text_index(table: str, ref: str, source: str, *extra: str) -> str:
    # Long texts take several rows (chunks) to stay under the tsvector size and position limits.
    cascade = " ON DELETE CASCADE" if source != "summaries" else ""
    return f"""
CREATE TABLE {table} (
    {ref} BIGINT NOT NULL REFERENCES {source}(id){cascade},
    chunk INTEGER NOT NULL,
    session_id TEXT COLLATE "C" NOT NULL,
    tsv TSVECTOR NOT NULL,
    PRIMARY KEY ({ref}, chunk)
);
CREATE INDEX {table}_tsv ON {table} USING GIN (tsv);
""" + "".join(extra)


# PostgreSQL's entries index cannot trail a high-water mark as SQLite's does: concurrent writers
# commit identity ids out of order, and such a mark could skip an entry forever. Entries were
# indexed in the append's own transaction until 0010 queued them instead (fts_pending).
_INITIAL_POSTGRES = _pg_text_index(
    "entries_fts",
    "entry_id",
    "entries",
    "CREATE INDEX entries_fts_session ON entries_fts (session_id);\n",
) + _pg_text_index("summaries_fts", "record_id", "records")

_HARDENING = """
ALTER TABLE sessions ADD COLUMN last_step {int};
ALTER TABLE sessions ADD COLUMN seal TEXT;
ALTER TABLE entries ADD COLUMN seal TEXT;
ALTER TABLE requests ADD COLUMN tenant {key};
ALTER TABLE requests ADD COLUMN tokens {int} NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN run {key};
ALTER TABLE requests ADD COLUMN spent_at {key};
ALTER TABLE requests ADD COLUMN prompt_last_seq {int};
ALTER TABLE requests ADD COLUMN seal TEXT;
ALTER TABLE checkpoints ADD COLUMN seal TEXT;
ALTER TABLE records ADD COLUMN seal TEXT;

-- The newest request that can anchor an estimate (TOK-2): one index step.
CREATE INDEX requests_anchor ON requests (session_id, id)
    WHERE entry_id IS NOT NULL AND new_input IS NOT NULL AND prompt_last_seq IS NOT NULL;
CREATE INDEX records_kind ON records (session_id, table_name, kind, id);
-- The foreign key's child side: deleting entries must not scan every request.
CREATE INDEX requests_entry ON requests (entry_id);

-- What delete_session leaves behind: the only deletion there is, recorded.
CREATE TABLE deletions (
    id {pk},
    session_id {key} NOT NULL,
    tenant {key} NOT NULL,
    agent {key} NOT NULL,
    parent {key},
    title TEXT,
    created_at TEXT NOT NULL,
    deleted_at TEXT NOT NULL,
    deleted_by TEXT,
    entries {int} NOT NULL,
    tokens {int} NOT NULL,
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
    tenant {key} NOT NULL,
    run {key} NOT NULL,
    tokens {int} NOT NULL,
    PRIMARY KEY (tenant, run)
){rowless};
CREATE TABLE spend_minutes (
    tenant {key} NOT NULL,
    minute {key} NOT NULL,
    tokens {int} NOT NULL,
    PRIMARY KEY (tenant, minute)
){rowless};
"""

# The spend guard's windows and runs are index ranges that cover the tokens they sum; imported
# usage has no time and no run, so it is not in them at all.
_SPEND_SQLITE = """
CREATE INDEX requests_spend ON requests (tenant, spent_at, tokens) WHERE spent_at IS NOT NULL;
CREATE INDEX requests_run ON requests (tenant, run, tokens) WHERE run IS NOT NULL;
"""
_SPEND_POSTGRES = """
CREATE INDEX requests_spend ON requests (tenant, spent_at) INCLUDE (tokens)
    WHERE spent_at IS NOT NULL;
CREATE INDEX requests_run ON requests (tenant, run) INCLUDE (tokens) WHERE run IS NOT NULL;
"""

_DAG_SUMMARIES = """
-- The dag engine's summary nodes (see ledger/_summaries.py for the rules they keep).
CREATE TABLE summaries (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    depth INTEGER NOT NULL CHECK (depth >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
    first_seq {int} NOT NULL,
    last_seq {int} NOT NULL,
    descendant_count {int} NOT NULL,
    descendant_tokens {int} NOT NULL,
    time_start TEXT NOT NULL,
    time_end TEXT NOT NULL,
    tokens {int} NOT NULL,
    summarizer TEXT NOT NULL,
    level TEXT NOT NULL CHECK (level IN ('normal', 'aggressive', 'count-only')),
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{{}}',
    sources_digest TEXT NOT NULL,
    -- The frontier (JSON ids, oldest first) once this row is stored: the newest row of a
    -- session names its frontier, so reading it costs O(log n) rows, not a scan.
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
    parent_id {int} NOT NULL REFERENCES summaries(id),
    child_id {int} NOT NULL UNIQUE REFERENCES summaries(id),
    position INTEGER NOT NULL,
    PRIMARY KEY (parent_id, position)
);
-- Coordination rows (epoch seconds): the single-flight compaction lease per session,
-- summarizer spend per tenant, and the per-tenant summarizer circuit breaker.
CREATE TABLE compaction_leases (
    session_id {key} PRIMARY KEY REFERENCES sessions(id),
    owner TEXT NOT NULL,
    acquired_at {real} NOT NULL,
    heartbeat_at {real} NOT NULL,
    expires_at {real} NOT NULL
);
CREATE TABLE summarizer_spend (
    id {pk},
    tenant {key} NOT NULL,
    session_id {key} NOT NULL REFERENCES sessions(id),
    at {real} NOT NULL,
    tokens {int} NOT NULL,
    summarizer TEXT NOT NULL
);
CREATE INDEX summarizer_spend_tenant ON summarizer_spend (tenant, at);
CREATE TABLE summarizer_breaker (
    tenant {key} PRIMARY KEY,
    failures INTEGER NOT NULL,
    opened_at {real},
    trial_at {real},
    updated_at {real} NOT NULL
);
"""

# What prompt caching saved, priced once per request (see _savings.py).
_SAVINGS = """
ALTER TABLE requests ADD COLUMN saved_usd {real};
ALTER TABLE sessions ADD COLUMN request_count {int} NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN saved_usd {real};
"""

# Keyed seals and the entries' chain (see _seal.py and _backfill.py): the ledger's id names its
# key file, key_check tells the right secret from a wrong one; neither is the secret.
_KEYED_CHAIN = """
CREATE TABLE ledger_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
ALTER TABLE entries ADD COLUMN prev_seal TEXT;
ALTER TABLE sessions ADD COLUMN head TEXT;
ALTER TABLE sessions ADD COLUMN head_seal TEXT;
ALTER TABLE summaries ADD COLUMN seal TEXT;
"""

# Memories across sessions (MEM-1, MEM-2; see _memories.py): a flush says which entries were
# read for facts before a stand-in compressed them, once per seq; a memory is one fact with the
# entries it came from, its tenant and agent kept on the row so a search of one agent's
# memories is one index range.
_MEMORIES = """
CREATE TABLE memory_flushes (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    first_seq {int} NOT NULL,
    last_seq {int} NOT NULL,
    why TEXT NOT NULL,
    extractor TEXT NOT NULL,
    facts {int} NOT NULL,
    created_at TEXT NOT NULL,
    seal TEXT NOT NULL,
    CHECK (first_seq <= last_seq)
);
CREATE UNIQUE INDEX memory_flushes_start ON memory_flushes (session_id, first_seq);
CREATE TABLE memories (
    id {pk},
    session_id {key} NOT NULL REFERENCES sessions(id),
    tenant {key} NOT NULL,
    agent {key} NOT NULL,
    first_seq {int} NOT NULL,
    last_seq {int} NOT NULL,
    entry_ids TEXT NOT NULL,
    kind TEXT NOT NULL,
    extractor TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    seal TEXT NOT NULL,
    CHECK (first_seq <= last_seq)
);
CREATE INDEX memories_scope ON memories (tenant, agent, digest);
CREATE INDEX memories_session ON memories (session_id, first_seq);
"""

# SQLite keeps the memories' text in its index (they are short), so a deleted memory leaves it
# by a trigger; PostgreSQL's rows cascade with their memory.
_MEMORIES_SQLITE = """
CREATE VIRTUAL TABLE memories_fts USING fts5 (text, tokenize='unicode61');
CREATE TRIGGER memories_fts_forget AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
"""

# Large entry and record bodies at rest as zstd frames on SQLite (see _bodies.py); digests and
# seals stay over the text, and older rows stay text. No column changes: the version it takes
# is what matters, since a comal from before cannot read a frame and must refuse the file.
# PostgreSQL's TOAST compresses large text already; the row says which codec a ledger uses.
_BODY_CODEC = "INSERT INTO ledger_meta (name, value) VALUES ('body_codec', '{codec}');\n"

# PostgreSQL's session locks hold across hosts (RES-2, SCL-1; see _pg_lock.py): beside the
# advisory lock, a lease row that a heartbeat keeps fresh, on the server's clock. Keyed by
# ``session``, not ``session_id``: a lock is coordination state, not a row of the session's
# history to count or delete with it. SQLite's lock is a file beside the ledger; the table is
# there too (unused) so both backends keep one schema.
_SESSION_LOCKS = """
CREATE TABLE session_locks (
    session {key} PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid {int} NOT NULL,
    backend_pid {int} NOT NULL,
    acquired_at {real} NOT NULL,
    heartbeat_at {real} NOT NULL,
    expires_at {real} NOT NULL
);
"""

# PostgreSQL's entries wait here for the next search of their session to index them
# (_postgres_index: a queue, where SQLite's fts_state is a high-water mark).
_SEARCH_BACKLOG_POSTGRES = """
CREATE TABLE fts_pending (
    entry_id BIGINT PRIMARY KEY REFERENCES entries(id) ON DELETE CASCADE,
    session_id TEXT COLLATE "C" NOT NULL
);
CREATE INDEX fts_pending_session ON fts_pending (session_id, entry_id);
"""

# Every row's seal covers its id, and the ledger seals which sessions it holds (_reseal.py,
# _ledger_head.py): one head row, moved when a session is created or deleted; and the events of
# the ledger as a whole (a restore accepted on purpose), each sealed with its id.
_SEALED_IDENTITY = """
CREATE TABLE ledger_head (
    name {key} PRIMARY KEY,
    generation {int} NOT NULL,
    sessions {int} NOT NULL,
    digest TEXT NOT NULL,
    seal TEXT NOT NULL
);
CREATE TABLE ledger_events (
    id {pk},
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    seal TEXT NOT NULL
);
"""

# Memory a person manages (DRV-7; see _memory_notes.py). A person's note is a memory of an
# agent that no session holds: SQLite cannot drop a NOT NULL, so its table is rebuilt with the
# same rows (ids kept: memories_fts is keyed by them) and its indexes and trigger made again
# (SQLite's own types spelt out: a dialect's part is not formatted); PostgreSQL drops the
# constraints in place. A note's index rows on PostgreSQL carry an empty session id, which no
# session has, so deleting a session never reaches them.
_MEMORY_NOTES_SQLITE = """
CREATE TABLE memories_new (
    id INTEGER PRIMARY KEY,
    session_id TEXT REFERENCES sessions(id),
    tenant TEXT NOT NULL,
    agent TEXT NOT NULL,
    first_seq INTEGER,
    last_seq INTEGER,
    entry_ids TEXT NOT NULL,
    kind TEXT NOT NULL,
    extractor TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    seal TEXT NOT NULL,
    CHECK (first_seq <= last_seq),
    CHECK ((session_id IS NULL) = (first_seq IS NULL) AND (first_seq IS NULL) = (last_seq IS NULL))
);
INSERT INTO memories_new (id, session_id, tenant, agent, first_seq, last_seq, entry_ids, kind,
    extractor, digest, created_at, body, seal)
    SELECT id, session_id, tenant, agent, first_seq, last_seq, entry_ids, kind, extractor,
    digest, created_at, body, seal FROM memories;
DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;
CREATE INDEX memories_scope ON memories (tenant, agent, digest);
CREATE INDEX memories_session ON memories (session_id, first_seq);
CREATE TRIGGER memories_fts_forget AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
"""
_MEMORY_NOTES_POSTGRES = """
ALTER TABLE memories ALTER COLUMN session_id DROP NOT NULL;
ALTER TABLE memories ALTER COLUMN first_seq DROP NOT NULL;
ALTER TABLE memories ALTER COLUMN last_seq DROP NOT NULL;
ALTER TABLE memories ADD CONSTRAINT memories_note_or_flushed
    CHECK ((session_id IS NULL) = (first_seq IS NULL) AND (first_seq IS NULL) = (last_seq IS NULL));
"""
# A forget is recorded, never a deletion: one row per forgotten memory (who, when, why, and
# the digest of what was forgotten), keyed like the memory (its session; none for a note), so
# deleting a session takes its memories' forgets with them. Search and listing leave a
# forgotten memory out by its id; listing an agent's memories newest first is one index range.
_MEMORY_FORGETS = """
CREATE TABLE memory_forgets (
    id {pk},
    session_id {key} REFERENCES sessions(id),
    memory_id {int} NOT NULL,
    tenant {key} NOT NULL,
    agent {key} NOT NULL,
    digest TEXT NOT NULL,
    forgotten_by TEXT NOT NULL,
    why TEXT NOT NULL,
    created_at TEXT NOT NULL,
    seal TEXT NOT NULL
);
CREATE UNIQUE INDEX memory_forgets_memory ON memory_forgets (memory_id);
CREATE INDEX memory_forgets_agent ON memory_forgets (tenant, agent, id);
CREATE INDEX memories_agent ON memories (tenant, agent, id);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", _INITIAL, _INITIAL_SQLITE, _INITIAL_POSTGRES),
    Migration("0002_proxy_keys", KEYS_DDL),
    Migration("0003_ledger_hardening", _HARDENING, _SPEND_SQLITE, _SPEND_POSTGRES, harden),
    Migration(
        "0004_dag_summaries",
        _DAG_SUMMARIES,
        "CREATE VIRTUAL TABLE summaries_text_fts USING fts5"
        " (text, content='', tokenize='unicode61');\n",
        _pg_text_index("summaries_text_fts", "summary_id", "summaries"),
    ),
    Migration("0005_request_savings", _SAVINGS, backfill=backfill_savings),
    Migration("0006_keyed_chain", _KEYED_CHAIN, backfill=key_and_chain),
    Migration(
        "0007_memories",
        _MEMORIES,
        _MEMORIES_SQLITE,
        _pg_text_index("memories_fts", "memory_id", "memories"),
    ),
    Migration(
        "0008_compressed_bodies",
        "",
        _BODY_CODEC.format(codec="zstd"),
        _BODY_CODEC.format(codec="toast"),
    ),
    Migration("0009_session_locks", _SESSION_LOCKS),
    Migration("0010_search_backlog", "", "", _SEARCH_BACKLOG_POSTGRES),
    Migration("0011_sealed_identity", _SEALED_IDENTITY, backfill=seal_identity),
    Migration("0012_memory_notes", "", _MEMORY_NOTES_SQLITE, _MEMORY_NOTES_POSTGRES),
    Migration("0013_memory_forgets", _MEMORY_FORGETS),
)
SCHEMA_VERSION = len(MIGRATIONS)
