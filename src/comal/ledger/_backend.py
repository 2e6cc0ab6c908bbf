"""The interface every ledger offers, whatever its backend (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from ..messages import Message
from ..tokens import TokenCounter
from ._coordination import BreakerRow, LeaseInfo
from ._keys import ProxyKey
from ._locks import SessionLock
from ._memories import MemoryInput, Remembered
from ._model import (
    CheckpointRecord,
    Deletion,
    Entry,
    EntryHead,
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
)
from ._pg_lock import PgSessionLock
from ._reads import RecallHit, RecallMode
from ._store import StepInput, UsageInput
from ._summaries import SummaryInput


class LedgerBackend(Protocol):
    """Append-only, scoped, lossless. Reads of an unresolved scope return nothing (LED-2).

    ``target`` names the ledger for messages (a URL without its password).
    """

    counter: TokenCounter
    target: str

    def atomic(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...
    # Every SQL statement and its parameters go to the callback while installed.
    def trace(self, callback: Callable[[str, Any], None]) -> AbstractContextManager[None]: ...
    # This thread's statements end by the deadline, cut off by the database (LedgerTimeout).
    def bounded(self, seconds: float) -> AbstractContextManager[None]: ...
    # Coordination: writers of a name take turns for the rest of the current atomic();
    # one process per session (RES-2), SessionLocked otherwise.
    def exclusive(self, name: str) -> None: ...
    def session_lock(self, scope: Scope) -> SessionLock | PgSessionLock: ...
    # Who holds the session's lock now, read without taking it (a hint); None: nobody.
    def session_lock_holder(self, scope: Scope) -> dict[str, Any] | None: ...
    # HMAC under the ledger's secret: the same in every process that shares the ledger.
    def derived(self, purpose: str, text: str) -> str: ...

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
    # Newest first, one page: only the page's rows are read (comal sessions).
    def session_page(
        self,
        *,
        tenant: str | None = None,
        agent: str | None = None,
        since: str | datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> SessionPage: ...
    def resolve(self, session_prefix: str) -> Scope: ...
    def children(self, scope: Scope) -> list[SessionInfo]: ...
    def set_status(self, scope: Scope, status: str) -> None: ...
    def rename_session(self, scope: Scope, title: str | None) -> None: ...
    def delete_session(
        self, scope: Scope, *, by: str | None = None, children: bool = False
    ) -> Deletion: ...
    def deletions(self, *, tenant: str | None = None) -> list[Deletion]: ...
    # The ledger as a whole: its events, and a restore accepted (opened with strict=False).
    def ledger_events(self) -> list[LedgerEvent]: ...
    def accept_restore(self, *, by: str | None = None) -> LedgerEvent | None: ...

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
    # Literal words in order by default; fts: FTS5 syntax; regex: RE2 (see _query's limits).
    def search(
        self, scope: Scope, query: str, *, regex: bool = False, fts: bool = False, limit: int = 50
    ) -> list[SearchHit]: ...
    def requests(self, scope: Scope) -> list[RequestRecord]: ...
    def last_request(self, scope: Scope, *, measured: bool = True) -> RequestRecord | None: ...
    def spend(
        self, tenant: str, *, since: str | datetime | None = None, run: str | None = None
    ) -> int: ...
    def usage_totals(self, scope: Scope, *, run: str | None = None) -> dict[str, int | None]: ...
    def usage_by_model(
        self, scope: Scope
    ) -> list[tuple[str | None, str | None, dict[str, Any]]]: ...
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
    # The dag engine's summaries and its compaction's coordination rows (ledger/_summaries.py).
    def add_summary(self, scope: Scope, draft: SummaryInput) -> SummaryRecord: ...
    def summaries(self, scope: Scope) -> list[SummaryRecord]: ...
    def summary(self, scope: Scope, summary_id: int) -> SummaryRecord | None: ...
    def summary_parent(self, scope: Scope, summary_id: int) -> int | None: ...
    def search_summaries(
        self, scope: Scope, query: str, *, regex: bool = False, fts: bool = False, limit: int = 50
    ) -> list[RecallHit]: ...
    def recall_search(
        self,
        scope: Scope,
        query: str,
        *,
        mode: RecallMode = "words",
        limit: int = 10,
        entries: bool = True,
        summaries: bool = True,
    ) -> list[RecallHit]: ...
    # Memories across sessions (ledger/_memories.py): written in a stand-in's transaction,
    # searched by (tenant, agent).
    def memory_gaps(self, scope: Scope, first_seq: int, last_seq: int) -> list[tuple[int, int]]: ...
    def add_memories(
        self,
        scope: Scope,
        first_seq: int,
        last_seq: int,
        facts: Sequence[MemoryInput],
        *,
        why: str,
        extractor: str,
    ) -> Remembered: ...
    def memories(self, scope: Scope) -> list[MemoryRecord]: ...
    def memory_flushes(self, scope: Scope) -> list[MemoryFlush]: ...
    def search_memories(
        self,
        tenant: str,
        agent: str,
        query: str,
        *,
        limit: int = 10,
        budget_s: float = ...,
        phrase: bool = False,
    ) -> list[tuple[MemoryRecord, float]]: ...
    def search_sessions(
        self,
        tenant: str,
        agent: str,
        query: str,
        *,
        limit: int = 10,
        exclude: str | None = None,
        budget_s: float = ...,
        phrase: bool = False,
    ) -> list[tuple[Entry, float]]: ...
    # Memory a person manages (ledger/_memory_notes.py, DRV-7): notes, forgets, pages.
    def add_note(
        self, tenant: str, agent: str, text: str, *, by: str
    ) -> tuple[MemoryRecord, bool]: ...
    def forget_memory(
        self, tenant: str, agent: str, memory_id: int, *, by: str, why: str = ""
    ) -> tuple[MemoryForget, bool]: ...
    def agent_memories(
        self,
        tenant: str,
        agent: str,
        *,
        before: int | None = None,
        limit: int = 20,
        forgotten: bool = False,
    ) -> list[tuple[MemoryRecord, MemoryForget | None]]: ...
    def acquire_lease(
        self, scope: Scope, owner: str, ttl: float, *, now: float | None = None
    ) -> bool: ...
    def renew_lease(
        self, scope: Scope, owner: str, ttl: float, *, now: float | None = None
    ) -> bool: ...
    def release_lease(self, scope: Scope, owner: str) -> None: ...
    def lease(self, scope: Scope) -> LeaseInfo | None: ...
    def add_summarizer_spend(
        self, scope: Scope, tokens: int, summarizer: str, *, now: float | None = None
    ) -> None: ...
    def summarizer_spend(self, tenant: str, *, since: float, session: str | None = None) -> int: ...
    def breaker(self, tenant: str) -> BreakerRow | None: ...
    def set_breaker(
        self,
        tenant: str,
        *,
        failures: int,
        opened_at: float | None,
        trial_at: float | None,
        now: float | None = None,
    ) -> None: ...
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
    def record_counts(
        self, scope: Scope, table: RecordTable, kinds: Sequence[str]
    ) -> dict[str, int]: ...

    # Proxy API keys (``comal keys``, ``comal serve``): stored hashed, one tenant each.
    def add_proxy_key(self, tenant: str, name: str = "") -> tuple[ProxyKey, str]: ...
    def proxy_keys(self, *, tenant: str | None = None) -> list[ProxyKey]: ...
    def has_active_proxy_keys(self) -> bool: ...
    def check_proxy_key(self, key: str) -> ProxyKey | None: ...
    def revoke_proxy_key(self, key_id: str) -> ProxyKey: ...
