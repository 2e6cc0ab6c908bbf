"""The PostgreSQL ledger (LED-4 scale-out): the same interface and semantics as SQLite's.

Open one with ``open_ledger("postgresql://user:password@host/db")`` or construct
:class:`PostgresLedger` with a ``schema`` to keep several ledgers in one database. Writers on
different machines may share a ledger: appends lock their session row, so sequences stay dense.
"""

from __future__ import annotations

from ._keys import ProxyKeys
from ._postgres_reads import _PgReads
from ._summaries_pg import PgSummaries

__all__ = ["PostgresLedger"]


class PostgresLedger(PgSummaries, _PgReads, ProxyKeys):
    """Append-only store over one psycopg connection. Synchronous by design, like SQLite's:
    async callers cross to a thread at their edge.

    ``schema`` names the PostgreSQL schema holding the tables (created if missing and
    ``create``); without it the connection's ``search_path`` decides (normally ``public``).
    The semantics are shared with SQLite in ``_core``; this class adds the connection, the
    in-transaction full-text index and ``amcheck``.
    """

    _mark = "%s"  # psycopg's placeholder, for the proxy-key statements shared with SQLite
