"""The backend seam: what any ledger store must offer (SQLite now; PostgreSQL has the same)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from ..messages import Message
from ..tokens import TokenCounter
from ._keys import ProxyKey
from ._model import (
    CheckpointRecord,
    Deletion,
    Entry,
    EntryHead,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SearchHit,
    SessionInfo,
    SummaryRecord,
)
from ._sqlite_base import StepInput, UsageInput


class LedgerBackend(Protocol):
    """Append-only, scoped, lossless. Reads of an unresolved scope return nothing (LED-2).

    ``target`` names the ledger for messages (a URL without its password).
    """

    counter: TokenCounter
    target: str

    def atomic(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...

    def create_session(
        self,
        tenant: str,
        agent: str,
        *,
        session_id: str | None = None,
        parent: str | None = None,
        title: str | None = None,
        source: str | None = None,
        meta: dict[str, Any] | None = None,
        created_at: str | datetime | None = None,
        status: str = "active",
        messages: Sequence[Message] = (),
    ) -> Scope: ...
    def session(self, scope: Scope) -> SessionInfo | None: ...
    def sessions(
        self, *, tenant: str | None = None, agent: str | None = None
    ) -> list[SessionInfo]: ...
    def resolve(self, session_prefix: str) -> Scope: ...
    def children(self, scope: Scope) -> list[SessionInfo]: ...
    def set_status(self, scope: Scope, status: str) -> None: ...
    def rename_session(self, scope: Scope, title: str | None) -> None: ...
    def delete_session(
        self, scope: Scope, *, by: str | None = None, children: bool = False
    ) -> Deletion: ...
    def deletions(self, *, tenant: str | None = None) -> list[Deletion]: ...

    def append(
        self,
        scope: Scope,
        messages: Sequence[Message],
        *,
        usage: UsageInput | None = None,
        join_step: int | None = None,
        created_at: str | None = None,
    ) -> list[Entry]: ...
    def append_steps(self, scope: Scope, steps: Iterable[StepInput]) -> int: ...
    def record_request(self, scope: Scope, entry_id: int | None, usage: UsageInput) -> None: ...

    def entries(
        self, scope: Scope, *, start_seq: int = 0, end_seq: int | None = None
    ) -> list[Entry]: ...
    def iter_entries(self, scope: Scope, *, batch: int = 500) -> Iterator[Entry]: ...
    def heads(self, scope: Scope, *, start_seq: int = 0) -> list[EntryHead]: ...
    def tail(
        self, scope: Scope, *, n: int | None = None, tokens: int | None = None
    ) -> list[Entry]: ...
    def entry(self, scope: Scope, entry_id: int) -> Entry | None: ...
    def entry_by_call(self, scope: Scope, call_id: str) -> Entry | None: ...
    def search(
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[SearchHit]: ...
    def requests(self, scope: Scope) -> list[RequestRecord]: ...
    def last_request(self, scope: Scope, *, measured: bool = True) -> RequestRecord | None: ...
    def spend(
        self, tenant: str, *, since: str | datetime | None = None, run: str | None = None
    ) -> int: ...
    def usage_totals(self, scope: Scope, *, run: str | None = None) -> dict[str, int | None]: ...
    def token_total(self, scope: Scope) -> int: ...

    def add_checkpoint(
        self,
        scope: Scope,
        message: Message,
        *,
        first_seq: int,
        last_seq: int,
        meta: dict[str, Any] | None = None,
    ) -> CheckpointRecord: ...
    def checkpoints(self, scope: Scope) -> list[CheckpointRecord]: ...
    def latest_checkpoint(self, scope: Scope) -> CheckpointRecord | None: ...
    def summary_frontier(self, scope: Scope) -> list[SummaryRecord]: ...
    def add_record(
        self, scope: Scope, table: RecordTable, kind: str, body: dict[str, Any]
    ) -> Record: ...
    def record(self, scope: Scope, table: RecordTable, record_id: int) -> Record | None: ...
    def records(
        self,
        scope: Scope,
        table: RecordTable,
        *,
        kinds: Sequence[str] | None = None,
        since_id: int | None = None,
        limit: int | None = None,
    ) -> list[Record]: ...
    def record_mark(self, scope: Scope, table: RecordTable = "receipt") -> int: ...

    # Proxy API keys (``comal keys``, ``comal serve``): stored hashed, one tenant each.
    def add_proxy_key(self, tenant: str, name: str = "") -> tuple[ProxyKey, str]: ...
    def proxy_keys(self, *, tenant: str | None = None) -> list[ProxyKey]: ...
    def has_active_proxy_keys(self) -> bool: ...
    def check_proxy_key(self, key: str) -> ProxyKey | None: ...
    def revoke_proxy_key(self, key_id: str) -> ProxyKey: ...
