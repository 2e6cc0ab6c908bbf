"""The ledger: an append-only, lossless, scoped store of everything an agent saw (LED-1..6).

Open one with :func:`open_ledger`; the embedded backend is SQLite in WAL mode, and a
``postgresql://`` URL opens the scale-out backend, :class:`PostgresLedger`, with the same interface
(LED-4). Every read takes a :class:`Scope` (tenant, agent, session) and reads nothing when the
scope does not resolve.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from platformdirs import user_data_dir

from ..errors import UserError
from ..tokens import TokenCounter
from ._backend import LedgerBackend
from ._model import (
    CheckpointRecord,
    Entry,
    EntryHead,
    Fault,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SearchHit,
    SessionInfo,
    SummaryRecord,
    VerifyReport,
)
from ._schema import MIGRATIONS, SCHEMA_VERSION
from ._sqlite import SQLiteLedger
from ._sqlite_base import StepInput, Synchronous, UsageInput
from ._summaries import BreakerRow, LeaseInfo, RecallHit, SummaryConflict, SummaryInput
from ._verify import verify

if TYPE_CHECKING:
    from ._postgres import PostgresLedger

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "BreakerRow",
    "CheckpointRecord",
    "Entry",
    "EntryHead",
    "Fault",
    "LeaseInfo",
    "Ledger",
    "LedgerBackend",
    "PostgresLedger",
    "RecallHit",
    "Record",
    "RecordTable",
    "RequestRecord",
    "SQLiteLedger",
    "Scope",
    "SearchHit",
    "SessionInfo",
    "StepInput",
    "SummaryConflict",
    "SummaryInput",
    "SummaryRecord",
    "Synchronous",
    "UsageInput",
    "VerifyReport",
    "default_ledger_path",
    "open_ledger",
    "verify",
]

Ledger = SQLiteLedger


def __getattr__(name: str) -> Any:
    # psycopg takes a fifth of a second to import: only programs that use PostgreSQL pay for it.
    if name == "PostgresLedger":
        from ._postgres import PostgresLedger

        return PostgresLedger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _conforms(sqlite: SQLiteLedger, postgres: PostgresLedger) -> list[LedgerBackend]:
    # mypy checks here, once, that both backends satisfy the protocol.
    return [sqlite, postgres]


def default_ledger_path() -> Path:
    """``COMAL_LEDGER`` if set, else ``ledger.db`` in the per-user data directory."""
    env = os.environ.get("COMAL_LEDGER")
    if env:
        return Path(env)
    return Path(user_data_dir("comal", appauthor=False)) / "ledger.db"


_PG_SCHEMES = ("postgresql://", "postgres://")


@overload
def open_ledger(
    path: Path | None = None,
    *,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
) -> SQLiteLedger: ...


@overload
def open_ledger(
    path: str,
    *,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
    schema: str | None = None,
) -> SQLiteLedger | PostgresLedger: ...


def open_ledger(
    path: str | Path | None = None,
    *,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
    schema: str | None = None,
) -> SQLiteLedger | PostgresLedger:
    """Open (creating and migrating if needed) the ledger at ``path`` or the default place.

    A ``postgresql://`` URL opens a :class:`PostgresLedger` on that database, in ``schema`` if
    given (created if missing). ``synchronous`` is SQLite's durability setting; PostgreSQL's is
    the server's ``synchronous_commit``.
    """
    if isinstance(path, str) and path.startswith(_PG_SCHEMES):
        from ._postgres import PostgresLedger

        return PostgresLedger(path, counter=counter, schema=schema)
    if schema is not None:
        raise UserError("schema applies to PostgreSQL ledgers only; pass a postgresql:// URL")
    return SQLiteLedger(
        path if path is not None else default_ledger_path(),
        counter=counter,
        synchronous=synchronous,
    )
