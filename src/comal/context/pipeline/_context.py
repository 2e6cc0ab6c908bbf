"""What every layer may read besides the work: the view's zones, the budget, the settings, the
schedule of the tail and the caller's cache. One value per assembly, built before the layers
run; nothing in it changes while they do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...ledger import CheckpointRecord, Entry
from ...tokens import Budget, TokenCounter
from .._render import EngineCache
from .._view import View
from ._config import PipelineConfig
from ._schedule import Schedule
from ._summary import StoredSummary
from ._tools import ResultFacts

__all__ = ["Context"]


@dataclass(frozen=True, slots=True)
class Context:
    view: View
    budget: Budget
    config: PipelineConfig
    counter: TokenCounter
    cache: EngineCache
    head: tuple[Entry, ...]
    head_facts: Mapping[int, ResultFacts]  # by entry id
    schedule: Schedule
    base: CheckpointRecord | None  # the checkpoint in front of the tail (ours or another's)
    summary: StoredSummary | None  # the base read as this engine's summary, when it is one

    @property
    def tail(self) -> tuple[Entry, ...]:
        return self.schedule.tail

    @property
    def now(self) -> int:
        return self.schedule.now
