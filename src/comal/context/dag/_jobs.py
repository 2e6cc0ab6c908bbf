"""What the dag engine plans (jobs) and reports doing (actions); all frozen values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .._assembly import Action
from .._engine import Job

__all__ = ["Blocked", "Carried", "Condense", "Deferred", "Evicted", "SummarizeLeaf"]


@dataclass(frozen=True, slots=True)
class SummarizeLeaf(Job):
    """Summarize the whole steps ``first_seq..last_seq`` (``entries`` entries, costing
    ``source_tokens``) into a leaf of about ``target_tokens`` (DAG-1). ``oversize``: the chunk
    is one step larger than the chunk cap, so a bounded deterministic extraction stands in for
    a model call. ``request_seq`` is the newest user message covered so far (carried)."""

    first_seq: int
    last_seq: int
    entries: int
    source_tokens: int
    target_tokens: int
    oversize: bool = False
    request_seq: int | None = None
    # Why now (ENG-1): "trigger" (over context_threshold, and it pays back), "cold" (the
    # cache expired anyway), "debt" (a deferred compaction paid at hard_threshold), "forced".
    reason: str = "trigger"


@dataclass(frozen=True, slots=True)
class Condense(Job):
    """Fold the adjacent frontier summaries ``children`` (one depth) into one of ``depth``."""

    children: tuple[int, ...]
    depth: int
    first_seq: int
    last_seq: int
    source_tokens: int
    target_tokens: int


@dataclass(frozen=True, slots=True)
class Blocked(Job):
    """Nothing can make the history smaller (the protected tail alone is over the target, or
    what is left out of the tail is too small to summarize): detected before any summarizer
    call and reported with ``code``, never retried in a loop (lossless-claw #268, #639)."""

    actionable: ClassVar[bool] = False

    code: str
    message: str
    history_tokens: int
    protected_tokens: int


@dataclass(frozen=True, slots=True)
class Deferred(Job):
    """ENG-1: the history is over ``context_threshold`` but the cache is warm and a pass would
    not pay back what it rewrites within the calls the session has made: the compaction is
    deferred (the debt), to be paid when the cache goes cold or at ``hard_threshold``."""

    actionable: ClassVar[bool] = False
    stop_reason: ClassVar[str] = "deferred"

    history_tokens: int
    trigger_tokens: int
    hard_tokens: int
    pays_back_after: float
    calls: int
    frontier_seq: int  # the last seq the frontier covers (-1: none): one record per frontier


@dataclass(frozen=True, slots=True)
class Evicted(Action):
    """DAG-4: the oldest evictable history left the assembly (never the store): summaries
    ``summaries`` and the entries ``first_seq..last_seq`` (-1 when none), ``tokens`` in all."""

    summaries: tuple[int, ...]
    first_seq: int
    last_seq: int
    entries: int
    tokens: int
    decided_at: int


@dataclass(frozen=True, slots=True)
class Carried(Action):
    """The newest user request, covered by a summary, sent verbatim after the summaries."""

    entry_id: int
    seq: int
