"""The ledger: an append-only, lossless, scoped store of everything an agent saw (LED-1..6).

Open one with :func:`open_ledger`: a file path opens the embedded backend, SQLite in WAL mode; a
``postgresql://`` (or ``postgres://``) URL opens the scale-out backend, :class:`PostgresLedger`,
with the same interface (LED-4). Only a caller that writes should pass ``create=True``: with
``create=False`` a missing ledger is :class:`LedgerNotFound` and nothing is made. Every read takes
a :class:`Scope` (tenant, agent, session) and reads nothing when the scope does not resolve.

**One store, two dialects.** The semantics are written once, in the parts of ``_ledger.Store``
(sessions and appends, records and request aggregates, reads and search, summaries, deletion and
verify's walks, coordination rows, proxy keys), each over the same ``_db.Db``: one connection in
autocommit mode, explicit transactions (``atomic()``, nested as savepoints), and every statement
written with ``?`` placeholders and passed through ``Db.execute``, which ``ledger.trace(callback)``
shows. What the backends do differently is a ``_dialect.Dialect``: the placeholder, the statement
that opens a write (SQLite's ``BEGIN IMMEDIATE`` takes its only write lock; PostgreSQL locks
rows ``FOR UPDATE``), the covering index a budget read names, DDL types, full-text search (FTS5
trailing the appends; ``tsvector`` rows written with them), the database's own check, and writer
serialization (:meth:`exclusive`). :class:`SQLiteLedger` and :class:`PostgresLedger` are the
store given its connection; each adds only how it opens and its :meth:`session_lock` (a file
lock beside the ledger; an advisory lock on a connection of its own).

**One list of migrations.** ``MIGRATIONS`` (``_schema``) names each migration once, its DDL
written once with type tokens a dialect spells and, where the backends must differ (full-text
tables, covering indexes), per-dialect DDL beside it, and its Python backfill. One runner
(``_migrate``) applies what a ledger lacks, each migration in one transaction with its "applied"
record; a database that is not a comal ledger is :class:`LedgerForeign` and left untouched.

**Sealed, chained, keyed.** Every body is digested (sha256 of its canonical JSON) and every row
sealed: HMAC-SHA256, under the ledger's secret, of its other columns (``_rows``, ``_seal``).
Each session's entries form a chain: an entry's seal covers the seal of the entry before it, and
the session row keeps the chain's head and a seal of (next_seq, head), so an append reads the
previous seal from the row it already locks. Reads check seals and digests and raise
:class:`LedgerRowDamaged` rather than return altered data; :func:`verify` checks every row, the
chain and the database's integrity, so a row rewritten with its digests recomputed, or entries
deleted, moved or cut off with the chain patched, is named by table and row. The secret is kept
outside the database: for SQLite a 0600 key file in the user's state directory named by the
ledger's id; for PostgreSQL ``COMAL_LEDGER_SECRET``, which the operator provides (or
``secret=``). A row's id is inside its seal (migration ``0011_sealed_identity``), and the
ledger's own sealed head (``_ledger_head``) counts its sessions, so a session deleted whole shows.
A ledger without its secret (copied to another machine, say) is :class:`LedgerSecretMissing`
and one whose key check matches no secret found :class:`LedgerKeyMismatch`, on open: only
``open_ledger(..., strict=False)`` (``comal verify``) opens it, reads checking digests only,
refuses writes, and ``verify`` reports a ``secret`` fault. What this machine last saw of a ledger
in its place is kept beside the key (``_rollback``), so an older copy put back there is
:class:`LedgerRolledBack`. Migration ``0006_keyed_chain`` keys and chains a ledger once. What the
seals cannot see: a change made by someone holding the secret, a row outside the entries' chain
deleted whole, and an older copy where this machine never saw a newer one (``docs/ledger.md``).

**Memories across sessions** (``_memories``, migration ``0007_memories``): facts saved in the
transaction of the stand-in that compresses their entries, once per seq, each naming its
sources, and searched by (tenant, agent) across that agent's sessions, failing closed. A
person's notes and forgets (``_memory_notes``, migrations ``0012_memory_notes`` and
``0013_memory_forgets``): a note is a memory of the agent that no session holds; a forget is
recorded, never a deletion, and search and listing honour it.

Messages name a ledger through :func:`describe_target`, which never shows a password.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ..errors import UserError
from ..tokens import TokenCounter
from ._backend import LedgerBackend
from ._coordination import BreakerRow, LeaseInfo
from ._errors import (
    BadSearchQuery,
    InvalidIdentifier,
    LedgerBadTarget,
    LedgerBusy,
    LedgerCorrupt,
    LedgerForeign,
    LedgerIsADirectory,
    LedgerKeyMismatch,
    LedgerNotADatabase,
    LedgerNotFound,
    LedgerReadOnly,
    LedgerRolledBack,
    LedgerRowDamaged,
    LedgerSecretMissing,
    LedgerTimeout,
    LedgerUnavailable,
    MemoryNotFound,
    MemorySearchTimeout,
    SearchTooBroad,
    SessionHasChildren,
    SessionLocked,
)
from ._keys import KEY_PREFIX as PROXY_KEY_PREFIX
from ._keys import ProxyKey
from ._locks import SessionLock
from ._memories import MemoryInput, Remembered
from ._model import (
    CheckpointRecord,
    Deletion,
    Entry,
    EntryHead,
    Fault,
    LedgerEvent,
    MemoryFlush,
    MemoryForget,
    MemoryRecord,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SearchHit,
    SessionInfo,
    SessionPage,
    SummaryRecord,
    VerifyReport,
)
from ._pg_lock import PgSessionLock
from ._query import MAX_HITS, MAX_PHRASE_WORDS, MAX_PREFIXES, MAX_TERMS, MAX_WORDS
from ._reads import RecallHit, RecallMode
from ._schema import MIGRATIONS, SCHEMA_VERSION, Migration
from ._seal import Secret
from ._sqlite import SQLiteLedger, Synchronous
from ._store import StepInput, UsageInput
from ._summaries import SummaryConflict, SummaryInput
from ._target import LedgerTarget, default_ledger_target, describe_target, parse_target

if TYPE_CHECKING:
    from ._postgres import PostgresLedger
    from ._verify import verify

__all__ = [
    "MAX_HITS",
    "MAX_PHRASE_WORDS",
    "MAX_PREFIXES",
    "MAX_TERMS",
    "MAX_WORDS",
    "MIGRATIONS",
    "PROXY_KEY_PREFIX",
    "SCHEMA_VERSION",
    "BadSearchQuery",
    "BreakerRow",
    "CheckpointRecord",
    "Deletion",
    "Entry",
    "EntryHead",
    "Fault",
    "InvalidIdentifier",
    "LeaseInfo",
    "Ledger",
    "LedgerBackend",
    "LedgerBadTarget",
    "LedgerBusy",
    "LedgerCorrupt",
    "LedgerEvent",
    "LedgerForeign",
    "LedgerIsADirectory",
    "LedgerKeyMismatch",
    "LedgerNotADatabase",
    "LedgerNotFound",
    "LedgerReadOnly",
    "LedgerRolledBack",
    "LedgerRowDamaged",
    "LedgerSecretMissing",
    "LedgerTarget",
    "LedgerTimeout",
    "LedgerUnavailable",
    "MemoryFlush",
    "MemoryForget",
    "MemoryInput",
    "MemoryNotFound",
    "MemoryRecord",
    "MemorySearchTimeout",
    "Migration",
    "PgSessionLock",
    "PostgresLedger",
    "ProxyKey",
    "RecallHit",
    "RecallMode",
    "Record",
    "RecordTable",
    "Remembered",
    "RequestRecord",
    "SQLiteLedger",
    "Scope",
    "SearchHit",
    "SearchTooBroad",
    "SessionHasChildren",
    "SessionInfo",
    "SessionLock",
    "SessionLocked",
    "SessionPage",
    "StepInput",
    "SummaryConflict",
    "SummaryInput",
    "SummaryRecord",
    "Synchronous",
    "UsageInput",
    "VerifyReport",
    "default_ledger_path",
    "default_ledger_target",
    "describe_target",
    "open_ledger",
    "verify",
]

Ledger = SQLiteLedger


def __getattr__(name: str) -> Any:
    # psycopg takes a fifth of a second to import: only programs that use PostgreSQL pay for it.
    if name == "PostgresLedger":
        from ._postgres import PostgresLedger

        return PostgresLedger
    if name == "verify":  # a whole-ledger walk; listing sessions does not need its code
        from ._verify import verify

        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _conforms(sqlite: SQLiteLedger, postgres: PostgresLedger) -> list[LedgerBackend]:
    # mypy checks here, once, that both backends satisfy the protocol.
    return [sqlite, postgres]


def default_ledger_path() -> Path:
    """``COMAL_LEDGER`` if set, else ``ledger.db`` in the per-user data directory.

    ``COMAL_LEDGER`` may be a ``postgresql://`` URL, which a Path would mangle: prefer
    :func:`default_ledger_target` (text), which :func:`open_ledger` takes as it is.
    """
    return Path(default_ledger_target())


@overload
def open_ledger(
    target: os.PathLike[str],
    *,
    create: bool = True,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
    secret: Secret | None = None,
    strict: bool = True,
) -> SQLiteLedger: ...


@overload
def open_ledger(
    target: str | None = None,
    *,
    create: bool = True,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
    schema: str | None = None,
    secret: Secret | None = None,
    strict: bool = True,
) -> SQLiteLedger | PostgresLedger: ...


def open_ledger(
    target: LedgerTarget = None,
    *,
    create: bool = True,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
    schema: str | None = None,
    secret: Secret | None = None,
    strict: bool = True,
) -> SQLiteLedger | PostgresLedger:
    """Open the ledger at ``target``: a file path, or a ``postgresql://`` / ``postgres://`` URL
    given as text (None: :func:`default_ledger_target`, i.e. ``COMAL_LEDGER`` or the per-user
    default).

    ``create`` lets a missing ledger (file, directory, PostgreSQL schema) be created; pass
    ``create=False`` from every command that only reads, so a mistyped path is
    :class:`LedgerNotFound` and nothing appears on disk. An existing ledger of an older schema is
    migrated either way. A database that is not a comal ledger is :class:`LedgerForeign` and left
    untouched; the other failures are the ``Ledger*`` errors of :mod:`comal.ledger`, each with a
    stable ``code``, the target as :func:`describe_target` shows it, and what to do.

    ``schema`` places a PostgreSQL ledger in that schema; ``synchronous`` is SQLite's durability
    setting (PostgreSQL's is the server's ``synchronous_commit``). ``secret`` keys the ledger's
    seals in place of its key file or ``COMAL_LEDGER_SECRET`` (see the package docstring).

    A ledger whose seals cannot be checked (its secret missing: :class:`LedgerSecretMissing`; a
    key check that matches no secret found: :class:`LedgerKeyMismatch`), whose sealed head does
    not match (:class:`LedgerRowDamaged`), or that is older than this machine last saw it in
    this place (:class:`LedgerRolledBack`) does not open. ``strict=False`` opens it anyway, for
    :func:`verify` to report what is wrong (``comal verify`` does): reads then check digests
    only where the secret is missing, and :meth:`accept_restore` accepts an older copy.
    """
    parsed = parse_target(target)
    if parsed.kind == "postgres":
        from ._postgres import PostgresLedger

        return PostgresLedger(
            parsed.value,
            counter=counter,
            schema=schema,
            create=create,
            secret=secret,
            strict=strict,
        )
    if schema is not None:
        raise UserError("schema applies to PostgreSQL ledgers only; pass a postgresql:// URL")
    return SQLiteLedger(
        parsed.value,
        counter=counter,
        synchronous=synchronous,
        create=create,
        secret=secret,
        strict=strict,
    )
