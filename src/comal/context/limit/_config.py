"""Engine settings (CFG-1: validated ranges, defaults that work) and the limits they imply.

All ratios are of the budget's *input limit* (window − output reserve − margin, TOK-4), the same
base :class:`~comal.tokens.Budget` uses for its threshold, so "0.9" here and there agree. The
engine works in history tokens (input − instructions − tool schemas); :class:`Limits` converts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from ...tokens import Budget, TokenCounter, default_counter

__all__ = ["EngineConfig", "Limits"]

ToolNames = frozenset[str]


class EngineConfig(BaseModel):
    """Settings of the default engine (LIM-1..6). Frozen: an engine run never mutates them."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    threshold_ratio: float = Field(default=0.9, gt=0, le=1, description="Compaction starts above.")
    # Well below the trigger: after a cut the next ~30 % of the window is appended without
    # rewriting the cached prefix again.
    target_ratio: float = Field(default=0.4, gt=0, lt=1, description="A cut goes down to this.")
    # lossless-claw #1085: with huge instructions, "target − fixed" collapses toward zero and a
    # cut would empty the history; the target never goes below this share of history capacity.
    min_target_ratio: float = Field(default=0.25, gt=0, lt=1)
    keep_recent_results: int = Field(
        default=5, ge=1, le=10_000, description="K newest results stay."
    )
    # A result read through EvidenceRead is already a page of stored evidence; referencing it
    # again would only send the model back to read the same page.
    # When the protected results alone overflow the target, let a checkpoint cover the older
    # of them (exact references stay) instead of bounding them and stopping the run.
    yield_protected_to_checkpoint: bool = True
    # When the protected results alone hold the history over the threshold (a small window,
    # large outputs), reference the older of them first, oldest first, never the newest step:
    # that rewrites only the end of the prefix, where a new checkpoint every turn would rewrite
    # it from the start and defeat the prompt cache (an 8k window checkpointed 7 calls of 8).
    yield_protected_to_references: bool = True
    never_reference_tools: ToolNames = frozenset({"EvidenceRead"})
    min_reference_tokens: int = Field(
        default=200, ge=0, description="Only larger results are referenced."
    )
    preview_chars: int = Field(default=160, ge=0, le=2_000)
    media_reserve_ratio: float = Field(
        default=0.25, ge=0, le=1, description="Images' share of history."
    )
    max_single_message_ratio: float = Field(default=0.5, gt=0, le=1)
    max_single_message_chars: int = Field(default=100_000, ge=1_000, le=10_000_000)
    checkpoint_max_tokens: int = Field(default=6_000, ge=200)
    checkpoint_max_ratio: float = Field(default=0.15, gt=0, le=0.5)
    checkpoint_request_chars: int = Field(
        default=1_500, ge=100, description="Longer requests are referenced."
    )
    checkpoint_max_requests: int = Field(default=12, ge=2)
    checkpoint_max_files: int = Field(default=25, ge=1)
    checkpoint_max_commands: int = Field(default=10, ge=1)
    checkpoint_max_errors: int = Field(default=5, ge=1)
    checkpoint_max_refs: int = Field(default=12, ge=1)
    pressure_loop_n: int = Field(default=3, ge=1, le=100)
    pressure_min_saving: float = Field(default=0.1, ge=0, lt=1)
    read_tools: ToolNames = frozenset({"Read", "read_file", "view", "open_file", "cat"})
    write_tools: ToolNames = frozenset({"Write", "write_file", "create_file", "write"})
    edit_tools: ToolNames = frozenset(
        {"Edit", "MultiEdit", "edit_file", "str_replace", "apply_patch", "NotebookEdit"}
    )
    # The Anthropic text-editor tool does all three; its ``command`` argument says which.
    editor_tools: ToolNames = frozenset({"str_replace_based_edit_tool", "str_replace_editor"})
    command_tools: ToolNames = frozenset(
        {"Bash", "bash", "shell", "exec_command", "run_terminal_cmd", "execute_bash", "run_command"}
    )
    plan_tools: ToolNames = frozenset({"TodoWrite", "todo_write", "update_plan", "write_todos"})
    counter: Annotated[TokenCounter | None, SkipJsonSchema()] = Field(
        default=None,
        exclude=True,
        description="Counts what the engine renders; None: default_counter().",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.min_target_ratio <= self.target_ratio < self.threshold_ratio:
            raise ValueError(
                "need min_target_ratio <= target_ratio < threshold_ratio, got "
                f"{self.min_target_ratio} / {self.target_ratio} / {self.threshold_ratio}"
            )
        return self

    @property
    def token_counter(self) -> TokenCounter:
        return self.counter if self.counter is not None else default_counter()


@dataclass(frozen=True, slots=True)
class Limits:
    """History-token limits of one assembly, derived from a budget and a config."""

    capacity: int  # hard: history may never exceed it
    threshold: int  # above it a turn triggers stage 1
    target: int  # a cut goes down to it
    checkpoint_reserve: int  # the most a derived checkpoint message may take
    media_reserve: int  # images in context may take at most this
    single_bound: int  # a message above this many tokens is bounded head+tail

    @classmethod
    def of(cls, budget: Budget, config: EngineConfig) -> Limits:
        capacity = budget.history_capacity
        limit, fixed = budget.input_limit, budget.fixed
        floor = math.floor(config.min_target_ratio * capacity)
        target = max(math.floor(config.target_ratio * limit) - fixed, floor)
        # When the floor applies, the threshold keeps the configured spacing above the target.
        scaled = math.ceil(floor * config.threshold_ratio / config.target_ratio)
        threshold = min(capacity, max(math.floor(config.threshold_ratio * limit) - fixed, scaled))
        target = min(target, threshold)
        reserve = min(
            config.checkpoint_max_tokens, math.floor(config.checkpoint_max_ratio * capacity)
        )
        return cls(
            capacity=capacity,
            threshold=threshold,
            target=target,
            checkpoint_reserve=max(1, min(reserve, target // 2)),
            media_reserve=math.floor(config.media_reserve_ratio * capacity),
            single_bound=max(1, math.floor(config.max_single_message_ratio * capacity)),
        )
