"""The summarizer seam the summarizing engines plan against (DAG-3, PIP-1 layer 7).

Engines never call a summarizer: they plan a job naming the sources, and the layer above
(:mod:`comal.compaction`) renders the sources, calls a :class:`Summarizer` and stores the
result. Implementations: a deterministic extractive one (no model, the offline default,
:mod:`._extractive`) and a provider-backed one one layer up. Sources and previous summaries are
*untrusted data*: what a summarizer returns is stored as a body, and every header a model sees
is built from stored rows, never from that text (DAG-6).

A summarizer that calls a model (and so may fail, and spends tokens the per-tenant caps count)
says so with a true ``spends`` attribute; one without it is treated as free and infallible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "LEVELS",
    "Level",
    "Summarizer",
    "SummarizerPlan",
    "SummaryRequest",
    "SummaryText",
]

# Escalation, in order: a structured summary, a compact one, then a deterministic count-only
# note that always fits and is always smaller than its source (DAG-3).
Level = Literal["normal", "aggressive", "count-only"]
LEVELS: tuple[Level, ...] = ("normal", "aggressive", "count-only")


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """What to summarize. ``sources`` is the rendered source text (untrusted); ``previous``
    the nearest preceding summaries' bodies, for continuity (untrusted too); ``depth`` 0 for
    raw messages, ``n`` for summaries of depth ``n - 1``; ``target_tokens`` the size to aim
    for; ``source_tokens`` what the sources cost (a summary must come out smaller)."""

    sources: str
    depth: int
    target_tokens: int
    level: Level
    source_tokens: int
    previous: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SummaryText:
    """A summarizer's answer: the body and who made it (``provider:model``, ``extractive``,
    ``count-only``), with the tokens it spent when a model was called."""

    text: str
    summarizer: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    # The reply was cut short (the model hit its output limit, or stopped for another reason
    # than the end of its answer): a truncation is never stored as a summary (ENG-3).
    truncated: bool = False


@runtime_checkable
class Summarizer(Protocol):
    @property
    def name(self) -> str: ...

    def summarize(self, request: SummaryRequest) -> SummaryText: ...


@dataclass(frozen=True, slots=True)
class SummarizerPlan:
    """Which summarizer an engine's configuration names, as data: each engine's configuration
    says it (``summarizer_plan()``), and the layer that holds the providers builds it, so no
    code outside an engine needs to know that engine's settings.

    ``models``: model specs tried in order, ``""`` for the session's own model through the
    session's provider; none: the extractive summarizer (offline). ``timeout_s``: each call's
    bound (``None``: the provider's). ``window_tokens``: the first model's window when the
    configuration gives it (0: read it from the model catalog)."""

    models: tuple[str, ...] = ()
    timeout_s: float | None = None
    window_tokens: int = 0
