"""The store: the ledger's semantics written once, each part over the same connection, dialect
and sealer (:class:`~._store.StoreBase`). A backend is this class given its connection; it adds
only how it opens and how a session is locked."""

from __future__ import annotations

from ._admin import Admin
from ._coordination import Coordination
from ._keys import ProxyKeys
from ._memories import Memories
from ._reads import Reads
from ._records import Records
from ._sessions import Sessions
from ._summaries import Summaries


class Store(Sessions, Records, Memories, Reads, Summaries, Admin, Coordination, ProxyKeys):
    """Append-only, scoped, lossless; synchronous by design (async callers cross to a thread
    at their edge). One connection per instance, shared by threads under a lock."""
