"""``/state`` and ``/compact`` of the limit engine (LIM-3, LIM-7): pure functions of a view."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from ...ledger import Entry
from ...tokens import Budget, TokenCounter
from .._assembly import CheckpointProposal
from .._view import View
from ._checkpoint import _fit, derive_checkpoint, previous_state
from ._config import EngineConfig, Limits
from ._workstate import WorkState

__all__ = ["compact", "render_state", "step_groups", "work_state"]


def work_state(view: View, config: EngineConfig | None = None) -> WorkState:
    """``/state``: the work state a checkpoint derived now would carry (LIM-3, LIM-7)."""
    config = config if config is not None else EngineConfig()
    state = previous_state(view.checkpoint)
    for group in step_groups(view.entries):
        state.fold(list(group), config)
    return state


def render_state(state: WorkState, counter: TokenCounter) -> str:
    """The text a checkpoint of ``state`` would carry, untrimmed."""
    message, _ = _fit(state, counter, max_tokens=10**9)
    return message.text


def compact(
    view: View, budget: Budget, config: EngineConfig | None = None
) -> CheckpointProposal | None:
    """``/compact``: derive a checkpoint now, without an LLM, covering every whole step before
    the protected tail (the newest step and the K newest tool results). None: nothing to cover,
    or a checkpoint that would not be smaller than what it stands for.
    """
    config = config if config is not None else EngineConfig()
    groups = step_groups(view.entries)
    results = [i for i, g in enumerate(groups) for e in g if e.message.tool_result is not None]
    keep = config.keep_recent_results
    protected = len(groups) - 1
    if len(results) >= keep and keep > 0:
        protected = min(protected, results[-keep])
    if protected <= 0:
        return None
    limits = Limits.of(budget, config)
    proposal = derive_checkpoint(
        view.checkpoint,
        groups[:protected],
        config,
        config.token_counter,
        limits.checkpoint_reserve,
        {"requested": "compact"},
    )
    # A small history is already as small as a checkpoint of it: one that would not make the
    # context smaller is not stored (it would grow what the model is sent).
    covered = sum(e.tokens for group in groups[:protected] for e in group)
    if view.checkpoint is not None:
        covered += view.checkpoint.tokens
    return proposal if proposal is not None and proposal.tokens < covered else None


def step_groups(entries: Sequence[Entry]) -> list[list[Entry]]:
    """``entries`` cut into their steps (runs of one ``step`` value), in order."""
    starts = [i for i, e in enumerate(entries) if i == 0 or e.step != entries[i - 1].step]
    return [list(entries[s:e]) for s, e in pairwise([*starts, len(entries)])]
