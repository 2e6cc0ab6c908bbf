"""One process per session (RES-2): the session locks are the ledger's
(:meth:`~comal.ledger.SQLiteLedger.session_lock`, a file lock beside an SQLite ledger, an advisory
lock in a PostgreSQL one); these names stay importable from the agent."""

from __future__ import annotations

from ..ledger._locks import SessionLock, lock_path, process_start
from ..ledger._pg_lock import PgSessionLock

__all__ = ["PgSessionLock", "SessionLock", "lock_path", "process_start"]
