"""The ``pipeline`` engine (PIP-1..4, OBS-1/2): ten layers over the history, every turn.

Opt in with ``engine = "pipeline"`` (``--engine pipeline``). Each layer is a pure function of
the assembly in progress with its own metrics (:mod:`._layers`); every decision is derived
from the entries alone (:mod:`._timeline`), so a resumed process sends what the live one
would have, and assembling twice gives the same bytes. The summary layer does no I/O: the
engine plans a :class:`PipelineSummarize` job and :mod:`comal.compaction` runs it; the
summary is stored as a checkpoint the view reads back in front of the tail, behind the head
(middle-out). The recall tool is ``session_search`` (over the raw session), offered to the
model only while this engine runs.

What a cache-break detector needs is on every assembly: ``breakdown["cache_fence"]`` (the
leading messages the next request repeats byte for byte unless it announces a rebase), a
:class:`Rebased` action for every deliberate edit below the previous fence, and ``new`` on
each :class:`Placeholdered` / :class:`ThinkingCleared` / :class:`Summarized` action made this
turn.
"""

from __future__ import annotations

from types import MappingProxyType

from pydantic import BaseModel

from ...tokens import Budget
from .._assembly import Assembly
from .._engine import Base, Job
from .._render import EngineCache
from .._view import View
from ._assemble import assemble, plan_summary, run_layers
from ._config import PipelineConfig
from ._extractive import PipelineExtractive
from ._layers import LAYERS, layer_names
from ._summary import (
    PIPELINE_ENGINE,
    PIPELINE_VERSION,
    FileRef,
    PipelineSummarize,
    RequestQuote,
    RestoreData,
    StoredSummary,
    render_sources,
    summary_message,
)
from ._tools import ResultFacts, command_is_read_only, result_facts
from ._work import (
    Cut,
    LayerReport,
    Offloaded,
    Placeholdered,
    Rebased,
    Reread,
    Restored,
    Summarized,
    TagsStripped,
    ThinkingCleared,
    Windowed,
)

__all__ = [
    "LAYERS",
    "PIPELINE_ENGINE",
    "PIPELINE_VERSION",
    "Cut",
    "FileRef",
    "LayerReport",
    "Offloaded",
    "PipelineConfig",
    "PipelineEngine",
    "PipelineExtractive",
    "PipelineSummarize",
    "Placeholdered",
    "Rebased",
    "RequestQuote",
    "Reread",
    "RestoreData",
    "Restored",
    "ResultFacts",
    "StoredSummary",
    "Summarized",
    "TagsStripped",
    "ThinkingCleared",
    "Windowed",
    "command_is_read_only",
    "layer_names",
    "pipeline_events",
    "render_sources",
    "result_facts",
    "run_layers",
    "summary_message",
]

_SYSTEM_CLAUSE = (
    "Context management (pipeline): older tool results may appear as placeholders that name "
    "the exact EvidenceRead call returning the original bytes; a summary, when present, is a "
    "lossy recall cue, not proof. Use session_search to find earlier content of this session "
    "and prefer newer verbatim evidence over a summary."
)

# OBS-2: the event kind each action maps to (the layer above writes them).
_EVENTS = MappingProxyType(
    {
        "Placeholdered": "context:masked",
        "ThinkingCleared": "context:evicted",
        "Windowed": "context:evicted",
        "Cut": "context:evicted",
        "Offloaded": "context:masked",
        "Summarized": "context:compacted",
        "Reread": "context:reread",
        "Rebased": "context:rebased",
    }
)


def pipeline_events(assembly: Assembly) -> list[tuple[str, object]]:
    """OBS-2: ``(kind, action)`` for every significant action new this turn (evictions by the
    evict layer are ``context:evicted``, other placeholders ``context:masked``)."""
    out: list[tuple[str, object]] = []
    for action in assembly.actions:
        kind = _EVENTS.get(type(action).__name__)
        if kind is None or getattr(action, "new", True) is False:
            continue
        if isinstance(action, Placeholdered) and action.layer == "evict":
            kind = "context:evicted"
        out.append((kind, action))
    return out


def _config(config: BaseModel) -> PipelineConfig:
    if not isinstance(config, PipelineConfig):
        raise TypeError(f"the pipeline engine takes a PipelineConfig, not {type(config).__name__}")
    return config


class PipelineEngine:
    """The :class:`~comal.context.Engine` value of the pipeline engine."""

    name = "pipeline"
    description = (
        "ten layers every turn (thinking, tags, window, evict, mask, Tier-0, offload, "
        "middle-out summary, restore, fit), cache-fenced"
    )
    config_type: type[BaseModel] = PipelineConfig
    bases: frozenset[Base] = frozenset({"checkpoint"})
    model_tools: tuple[str, ...] = ("EvidenceRead", "session_search", "memory_search")
    system_clause = _SYSTEM_CLAUSE

    def threshold_ratio(self, config: BaseModel) -> float:
        return _config(config).compaction_trigger_ratio

    def assemble(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        state: object = None,
        cache: EngineCache | None = None,
    ) -> Assembly:
        # No state: every decision is a function of the view (see ._timeline).
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
        job = plan_summary(view, budget, _config(config), force=force, cache=cache)
        return () if job is None else (job,)
