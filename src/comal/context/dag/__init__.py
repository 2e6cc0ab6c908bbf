"""The dag engine: lossless summaries you can zoom back into (DAG-1..9).

Every message stays in the ledger. After a turn, when the history crosses
``context_threshold`` of the budget, :meth:`DagEngine.plan` asks for leaf summaries of the
oldest out-of-tail whole steps and for condensed summaries of adjacent same-depth ones; the
layer above (:mod:`comal.compaction`) makes and stores them. Each turn
:meth:`DagEngine.assemble` sends the pinned instructions, the summary frontier rendered
honestly, the fresh tail and everything else after the frontier verbatim, evicting the oldest
items from the *assembly* when it still does not fit. Recall tools (``ctx_search``,
``ctx_inspect``, ``ctx_expand``) are offered to the model while it runs.
"""

from __future__ import annotations

from pydantic import BaseModel

from ...tokens import Budget
from .._assembly import Assembly
from .._engine import Base, Job
from .._render import EngineCache
from .._view import View
from ._assemble import assemble, steps_of
from ._config import DagConfig, DagLimits, protected_steps
from ._jobs import Blocked, Carried, Condense, Deferred, Evicted, SummarizeLeaf
from ._plan import plan
from ._present import FOOTER_PREFIX, HEADER_PREFIX, SYSTEM_CLAUSE, expand_call, present
from ._sources import render_children, render_entries, sources_digest
from ._task import summary_task, task_message
from ._timing import cache_state, calls_seen, timing

__all__ = [
    "FOOTER_PREFIX",
    "HEADER_PREFIX",
    "RECALL_TOOLS",
    "SYSTEM_CLAUSE",
    "Blocked",
    "Carried",
    "Condense",
    "DagConfig",
    "DagEngine",
    "DagLimits",
    "Deferred",
    "Evicted",
    "SummarizeLeaf",
    "assemble",
    "cache_state",
    "calls_seen",
    "expand_call",
    "plan",
    "present",
    "protected_steps",
    "render_children",
    "render_entries",
    "sources_digest",
    "steps_of",
    "summary_task",
    "task_message",
    "timing",
]

RECALL_TOOLS = ("ctx_search", "ctx_inspect", "ctx_expand")


def _config(config: BaseModel) -> DagConfig:
    if not isinstance(config, DagConfig):
        raise TypeError(f"the dag engine takes a DagConfig, not {type(config).__name__}")
    return config


class DagEngine:
    """The :class:`~comal.context.Engine` value of the dag engine."""

    name = "dag"
    description = (
        "lossless summary DAG: leaf and condensed summaries of old steps, honest headers, "
        "recall tools, eviction from the assembly only"
    )
    config_type: type[BaseModel] = DagConfig
    bases: frozenset[Base] = frozenset({"summaries"})
    model_tools: tuple[str, ...] = (*RECALL_TOOLS, "EvidenceRead", "memory_search")
    system_clause = SYSTEM_CLAUSE

    def threshold_ratio(self, config: BaseModel) -> float:
        return _config(config).context_threshold

    def assemble(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        state: object = None,
        cache: EngineCache | None = None,
    ) -> Assembly:
        return assemble(view, budget, _config(config), cache=cache)

    def plan(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        force: bool = False,
        cache: EngineCache | None = None,
    ) -> tuple[Job, ...]:
        return plan(view, budget, _config(config), force=force, cache=cache)
