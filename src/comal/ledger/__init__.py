"""The ledger: an append-only, lossless, scoped store of everything an agent saw (LED-1..6).

Open one with :func:`open_ledger`; the embedded backend is SQLite in WAL mode. Every read takes a
:class:`Scope` (tenant, agent, session) and reads nothing when the scope does not resolve.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

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
    VerifyReport,
)
from ._schema import MIGRATIONS, SCHEMA_VERSION
from ._sqlite import SQLiteLedger
from ._sqlite_base import StepInput, Synchronous, UsageInput
from ._verify import verify

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CheckpointRecord",
    "Entry",
    "EntryHead",
    "Fault",
    "Ledger",
    "LedgerBackend",
    "Record",
    "RecordTable",
    "RequestRecord",
    "SQLiteLedger",
    "Scope",
    "SearchHit",
    "SessionInfo",
    "StepInput",
    "Synchronous",
    "UsageInput",
    "VerifyReport",
    "default_ledger_path",
    "open_ledger",
    "verify",
]

Ledger = SQLiteLedger


def _conforms(ledger: SQLiteLedger) -> LedgerBackend:
    # mypy checks here, once, that the SQLite backend satisfies the protocol.
    return ledger


def default_ledger_path() -> Path:
    """``COMAL_LEDGER`` if set, else ``ledger.db`` in the per-user data directory."""
    env = os.environ.get("COMAL_LEDGER")
    if env:
        return Path(env)
    return Path(user_data_dir("comal", appauthor=False)) / "ledger.db"


def open_ledger(
    path: str | Path | None = None,
    *,
    counter: TokenCounter | None = None,
    synchronous: Synchronous = "NORMAL",
) -> SQLiteLedger:
    """Open (creating and migrating if needed) the ledger at ``path`` or the default place."""
    return SQLiteLedger(
        path if path is not None else default_ledger_path(),
        counter=counter,
        synchronous=synchronous,
    )
