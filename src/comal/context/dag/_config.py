"""Settings of the dag engine (CFG-1: the seed's defaults and ranges) and the limits they imply.

Ratios are of the budget's *input limit* (window − output reserve − margin, TOK-4), as for the
limit engine; the engine works in history tokens (input − instructions − tool schemas).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from ...tokens import Budget, TokenCounter, default_counter
from .._summarizer import SummarizerPlan

__all__ = ["DagConfig", "DagLimits", "protected_steps"]

# What a summarizer prompt adds around the sources (instructions, previous summaries' headers).
TEMPLATE_TOKENS = 600
# The smallest chunk cap a small summarizer window may leave (below it nothing is worth it).
MIN_CHUNK_CAP = 512


class DagConfig(BaseModel):
    """Settings of the dag engine (DAG-1..9). Frozen: an engine run never mutates them."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    # Issue 33: the defaults are priced, not the seed's (0.75, 0.5, 0.25, 8 steps, 1,200 and
    # 1,500 tokens: still valid settings). A request reads its whole history from the cache
    # at every call, so what a session costs is mostly how much history it carries; a
    # compaction rewrites only what follows the frontier (the new leaf, the task's state and
    # the fresh tail). Measured on the shared corpus's long, tool-heavy runs at a 45k window
    # (docs/bench.md): the seed's defaults cost 0.79× the full history, compacting "deeper and
    # rarer" (0.75 → 0.1) 0.71×, these 0.49×.
    context_threshold: float = Field(
        default=0.25, ge=0.1, le=0.95, description="Utilization that triggers a leaf pass."
    )
    # A pass goes down to here (lossless-claw #282: never a pass every turn; below the fresh
    # tail, a lower target changes nothing).
    compaction_target: float = Field(default=0.1, ge=0.05, lt=0.95)
    # lossless-claw #1085: with huge instructions "target − fixed" collapses toward zero; the
    # target never goes below this share of the history capacity.
    min_target_ratio: float = Field(default=0.05, gt=0, lt=1)
    fresh_tail_turns: int = Field(default=3, ge=1, le=50, description="Steps always verbatim.")
    leaf_chunk_tokens: int = Field(default=20_000, ge=1_000, le=100_000)
    leaf_target_tokens: int = Field(default=500, ge=96, le=5_000)
    # A leaf only when the chunk is worth it: below this the pass would run every turn.
    leaf_min_chunk_tokens: int = Field(default=3_000, ge=200, le=100_000)
    condensed_min_fanout: int = Field(default=4, ge=2, le=32)
    condensed_target_tokens: int = Field(default=800, ge=96, le=8_000)
    defer_compaction: bool = True
    # ENG-1: compaction timed by the prompt cache (see _timing.py). The cache's lifetime
    # (300 s: Anthropic's default; 3,600 for the 1-hour cache; 0: never taken as cold), the
    # price of writing a token relative to reading it (Anthropic: 1.25 / 0.10), and the share
    # of the history capacity at which a deferred compaction is paid whatever the cache.
    cache_ttl_s: float = Field(default=300.0, ge=0, le=86_400)
    cache_write_cost: float = Field(default=12.5, ge=1, le=100)
    hard_threshold: float = Field(default=0.9, gt=0, le=1)
    summarizer: Literal["extractive", "provider"] = Field(
        default="extractive",
        description="extractive (no model, offline) or provider (summarizer_model).",
    )
    summarizer_model: str = Field(
        default="", max_length=300, description="provider:model; empty = the session's model."
    )
    summarizer_fallbacks: tuple[str, ...] = Field(default=(), max_length=8)
    # The summarizer model's window; 0 = unknown (the chunk cap is leaf_chunk_tokens alone).
    summarizer_window_tokens: int = Field(default=0, ge=0)
    spend_max_tokens_per_hour: int = Field(default=500_000, ge=0, description="0 disables.")
    spend_max_tokens_per_day: int = Field(default=5_000_000, ge=0, description="0 disables.")
    # ENG-3: one session's own summarizer spend, whatever the tenant's caps leave it.
    spend_max_tokens_per_session: int = Field(default=2_000_000, ge=0, description="0 disables.")
    # After a session's summarizer fails (or answers what may not be stored), it waits this
    # long before calling the model again, doubling with each failure in a row, up to
    # backoff_max_s; a success ends it. 0 disables.
    backoff_base_s: float = Field(default=30.0, ge=0, le=3_600)
    backoff_max_s: float = Field(default=1_800.0, ge=1, le=86_400)
    breaker_failure_threshold: int = Field(default=5, ge=1, le=100)
    breaker_reset_ms: int = Field(default=60_000, ge=1_000, le=3_600_000)
    breaker_half_open_ms: int = Field(default=30_000, ge=1_000, le=3_600_000)
    max_passes_per_sweep: int = Field(default=16, ge=1, le=1_000)
    sweep_deadline_s: float = Field(default=300.0, gt=0, le=3_600)
    call_timeout_s: float = Field(default=120.0, gt=0, le=3_600)
    # Renewed every third of it: 20 s outlives a 10 s wait for SQLite's write lock, and a killed
    # compactor's successor waits at most that long.
    lease_ttl_s: float = Field(default=20.0, ge=1, le=3_600)
    max_single_message_ratio: float = Field(default=0.5, gt=0, le=1)
    max_single_message_chars: int = Field(default=100_000, ge=1_000, le=10_000_000)
    counter: Annotated[TokenCounter | None, SkipJsonSchema()] = Field(
        default=None,
        exclude=True,
        description="Counts what the engine renders; None: default_counter().",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.compaction_target < self.context_threshold:
            raise ValueError(
                f"need compaction_target < context_threshold, got {self.compaction_target} / "
                f"{self.context_threshold}"
            )
        return self

    @property
    def token_counter(self) -> TokenCounter:
        return self.counter if self.counter is not None else default_counter()

    def summarizer_plan(self) -> SummarizerPlan:
        """The summarizer these settings name: none to build (``extractive``: the engine's
        offline default runs), or ``summarizer_model`` (empty: the session's own model) then
        each of ``summarizer_fallbacks``."""
        if self.summarizer == "extractive":
            return SummarizerPlan()
        models = (self.summarizer_model, *self.summarizer_fallbacks)
        return SummarizerPlan(models, self.call_timeout_s, self.summarizer_window_tokens)

    def with_summarizer_window(self, window: int) -> Self:
        """These settings with a model summarizer's window (DAG-1: leaf chunks are clamped to
        it), unless they give one or name no model summarizer."""
        if self.summarizer != "provider" or self.summarizer_window_tokens:
            return self
        return self.model_copy(update={"summarizer_window_tokens": window})


@dataclass(frozen=True, slots=True)
class DagLimits:
    """History-token limits of one assembly or plan, derived from a budget and a config."""

    capacity: int  # hard: history may never exceed it
    trigger: int  # above it, at the end of a turn, a leaf pass is due
    target: int  # a pass goes down to it
    chunk_cap: int  # the most a leaf's sources may take
    hard: int  # above it a deferred compaction is paid whatever the cache (ENG-1)
    single_bound: int  # a message above this many tokens is bounded head + tail (DAG-5)
    single_chars: int  # ... or above this many characters
    # A leaf's and a condensed summary's target: the configured ones, smaller in a window
    # where a summary that size would take most of what history may use.
    leaf_target: int = 1_200
    condensed_target: int = 1_500

    @classmethod
    def of(cls, budget: Budget, config: DagConfig) -> DagLimits:
        capacity = budget.history_capacity
        limit, fixed = budget.input_limit, budget.fixed
        floor = math.floor(config.min_target_ratio * capacity)
        target = max(math.floor(config.compaction_target * limit) - fixed, floor)
        scaled = math.ceil(floor * config.context_threshold / config.compaction_target)
        trigger = min(capacity, max(math.floor(config.context_threshold * limit) - fixed, scaled))
        cap = config.leaf_chunk_tokens
        if config.summarizer_window_tokens:
            room = (
                config.summarizer_window_tokens
                - config.leaf_target_tokens * 2  # the target and one previous summary
                - TEMPLATE_TOKENS
            )
            cap = max(MIN_CHUNK_CAP, min(cap, room))
        # DAG-5: the cap scales with the window (about four characters a token), up to the
        # configured characters.
        chars = min(config.max_single_message_chars, max(1_000, 4 * capacity))
        return cls(
            capacity=capacity,
            trigger=trigger,
            target=min(target, trigger),
            chunk_cap=cap,
            hard=max(trigger, math.floor(config.hard_threshold * capacity)),
            single_bound=max(1, math.floor(config.max_single_message_ratio * capacity)),
            single_chars=chars,
            leaf_target=min(config.leaf_target_tokens, max(96, capacity // 8)),
            condensed_target=min(config.condensed_target_tokens, max(96, capacity // 6)),
        )


def protected_steps(sizes: Sequence[int], fresh: int, room: int) -> int:
    """How many of the newest steps (their ``sizes``, oldest first) stay verbatim: the fresh
    tail (``fresh`` steps), fewer while they alone hold more than ``room`` tokens (what the
    window leaves history beside what is never left out), never fewer than the newest one.
    A fresh tail over the window by itself would otherwise leave nothing to summarize and the
    assembly bounding its messages turn after turn (CONTEXT_PRESSURE_LOOP, lossless-claw
    #639): its older steps are summarized and evicted instead, exact in the ledger."""
    count = min(fresh, len(sizes))
    held = sum(sizes[len(sizes) - count :])
    while count > 1 and held > room:
        held -= sizes[len(sizes) - count]
        count -= 1
    return count
