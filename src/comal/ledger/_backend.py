"""The backend seam: what any ledger store must offer (SQLite now; PostgreSQL has the same)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..messages import Message
from ..tokens import TokenCounter
from ._model import (
    CheckpointRecord,
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
from ._summaries import BreakerRow, LeaseInfo, RecallHit, SummaryInput


class LedgerBackend(Protocol):
    """Append-only, scoped, lossless. Reads of an unresolved scope return nothing (LED-2)."""

    counter: TokenCounter

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
        created_at: str | None = None,
    ) -> Scope: ...
    def session(self, scope: Scope) -> SessionInfo | None: ...
    def sessions(
        self, *, tenant: str | None = None, agent: str | None = None
    ) -> list[SessionInfo]: ...
    def resolve(self, session_prefix: str) -> Scope: ...
    def children(self, scope: Scope) -> list[SessionInfo]: ...
    def set_status(self, scope: Scope, status: str) -> None: ...

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
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[RecallHit]: ...
    def recall_search(
        self,
        scope: Scope,
        query: str,
        *,
        regex: bool = False,
        limit: int = 10,
        entries: bool = True,
        summaries: bool = True,
        any_word: bool = True,
    ) -> list[RecallHit]: ...
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
    def summarizer_spend(self, tenant: str, *, since: float) -> int: ...
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
        self, scope: Scope, table: RecordTable, *, kinds: Sequence[str] | None = None
    ) -> list[Record]: ...
