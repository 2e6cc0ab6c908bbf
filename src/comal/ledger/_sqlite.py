"""The embedded SQLite ledger (LED-4): WAL, foreign keys, one transaction per step."""

from __future__ import annotations

from ._keys import ProxyKeys
from ._sqlite_base import Synchronous
from ._sqlite_reads import _Reads
from ._summaries import SqliteSummaries

__all__ = ["SQLiteLedger", "Synchronous"]


class SQLiteLedger(SqliteSummaries, _Reads, ProxyKeys):
    """Append-only store. Synchronous by design: async callers cross to a thread at their edge.

    One connection per instance, guarded by a lock so a ledger can be shared by threads. Open
    one with :func:`~comal.ledger.open_ledger`; ``create=False`` opens only an existing ledger.
    The semantics (sessions, appends, records, aggregates, deletion) are shared with PostgreSQL
    in ``_core``; this class adds SQLite's connection, cache-backed entry reads, search and
    integrity check.
    """
