"""Making the dag engine's summaries: escalation, validation, storage (DAG-1..3, DAG-9, ENG-3).

A job's sources are rendered (:func:`comal.context.dag.render_entries` or
``render_children``: every block under a header naming its role, so text a tool returned
never reads as the user's) and summarized at the ``normal`` level, then ``aggressive``,
stopping at the first acceptable text. A text is refused, never stored, when it is empty, not
smaller than its sources, reads like an error reply (an API error body, an apology or refusal,
a status line), was cut short at the summarizer's output limit, or runs over three times its
target: a cut of it would be a truncation stored as a summary (lossless-claw #79). A refusal
counts as a failure. When a model's levels are both refused, the extractive summarizer (no
model, deterministic, bounded by its target) makes the summary and the header says so ("by
extractive"); the count-only note is the floor. A summarizer that fails outright (a
:class:`~comal.providers.ProviderError` after every fallback, an auth failure included)
writes nothing: the failure is counted by the breaker and the session's backoff, and the job is
left for a later pass. With the breaker open, the session backing off, or the tenant or the
session over a spend cap, the summarizer is not called at all and the job goes straight to the
count-only note.

Each summary is one ledger transaction (:meth:`~comal.ledger.LedgerBackend.add_summary`,
with its edges and full-text row); a crash before it commits leaves the old state.
:data:`CAP_MARKER` is how summaries cut by an earlier comal end: ``comal doctor`` finds them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..context import (
    ExtractiveSummarizer,
    Level,
    Summarizer,
    SummaryRequest,
    SummaryText,
    count_only_note,
)
from ..context.dag import (
    Condense,
    SummarizeLeaf,
    render_children,
    render_entries,
    sources_digest,
    summary_task,
)
from ..ledger import Entry, SummaryInput, SummaryRecord
from ..tokens import TokenCounter
from ._guard import Guard

__all__ = [
    "CAP_MARKER",
    "Made",
    "SummarizerFailed",
    "acceptable",
    "condensed_input",
    "leaf_input",
    "make_text",
    "refused",
]

CAP_MARKER = "[… cut by comal: the summarizer wrote {n} tokens, over 3× its {t}-token target]"

# What an error reply or a refusal looks like when a provider returns it as ordinary text.
_ERROR_REPLY = re.compile(
    r"(?is)^\s*(?:\{\s*\"?(?:error|detail|message)\"?\s*:|error\b|api error|http \d{3}|"
    r"\d{3} (?:unauthorized|forbidden|too many requests|internal server error|bad request)|"
    r"unauthorized|forbidden|invalid (?:api )?key|rate limit|i(?:'m| am) sorry|"
    r"i can(?:no|')t|as an ai|request failed|service unavailable|<!doctype html|<html)"
)


class SummarizerFailed(Exception):
    """Every summarizer in the chain failed; ``cause`` is the last failure."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Made:
    text: str
    summarizer: str
    level: Level
    rejected: tuple[str, ...] = ()  # why earlier levels' texts were refused


def acceptable(text: str, request: SummaryRequest, counter: TokenCounter) -> str | None:
    """Why ``text`` must not be stored as a summary of ``request``, or None when it may."""
    if not text.strip():
        return "empty"
    if _ERROR_REPLY.match(text):
        return "an error reply, not a summary"
    tokens = counter.count(text)
    if tokens >= request.source_tokens:
        return f"not smaller than its sources ({tokens:,} >= {request.source_tokens:,} tokens)"
    return None


def refused(answer: SummaryText, request: SummaryRequest, counter: TokenCounter) -> str | None:
    """Why a summarizer's answer must not be stored (ENG-3), or None: what
    :func:`acceptable` refuses, a reply cut short, and one over three times its target (a cut
    of it would be a truncation stored as a summary, lossless-claw #79)."""
    if answer.truncated:
        return "cut short at the summarizer's output limit: a truncation is not a summary"
    tokens = counter.count(answer.text)
    if tokens > 3 * request.target_tokens:
        return f"{tokens:,} tokens, over 3× its {request.target_tokens:,}-token target"
    return acceptable(answer.text, request, counter)


def make_text(
    request: SummaryRequest,
    summarizer: Summarizer,
    counter: TokenCounter,
    guard: Guard | None,
    *,
    oversize: bool = False,
) -> Made:
    """Escalate normal → aggressive → (after a model) the extractive summary → count-only;
    see the module docstring.

    Raises :class:`SummarizerFailed` when a model call failed (nothing may be written)."""
    rejected: list[str] = []
    spends = bool(getattr(summarizer, "spends", False))
    levels: tuple[Level, ...] = ("normal", "aggressive")
    if oversize and spends:
        # A single step larger than the summarizer's window: a bounded deterministic
        # extraction stands in for the model call.
        summarizer, spends = ExtractiveSummarizer(counter), False
    blocked = False
    for level in levels:
        if spends and guard is not None:
            why = guard.blocked()
            if why is not None:
                rejected.append(f"{level}: summarizer not called ({why})")
                blocked = True
                break
        try:
            answer: SummaryText = summarizer.summarize(replace(request, level=level))
        except SummarizerFailed:
            if guard is not None and spends:
                guard.failure()
                guard.backoff()
            raise
        if spends and guard is not None:
            guard.spent(answer, request)
        why = refused(answer, request, counter)
        if why is None:
            if spends and guard is not None:
                guard.success()
            return Made(answer.text, answer.summarizer, level, tuple(rejected))
        if spends and guard is not None:
            guard.failure()
        rejected.append(f"{level}: {why}")
    if spends and not blocked:
        # The model answered, but nothing it wrote may be stored: the extractive summary
        # stands in, deterministic, bounded by its target, and named as what made it.
        if guard is not None:
            guard.backoff()
        plain = ExtractiveSummarizer(counter).summarize(replace(request, level="aggressive"))
        if refused(plain, request, counter) is None:
            return Made(plain.text, plain.summarizer, "aggressive", tuple(rejected))
    note = count_only_note(replace(request, level="count-only"), counter)
    return Made(note, "count-only", "count-only", tuple(rejected))


def leaf_request(
    job: SummarizeLeaf, entries: Sequence[Entry], previous: Sequence[SummaryRecord]
) -> tuple[SummaryRequest, str]:
    sources = render_entries(entries)
    request = SummaryRequest(
        sources=sources,
        depth=0,
        target_tokens=job.target_tokens,
        level="normal",
        source_tokens=sum(e.tokens for e in entries),
        previous=tuple(s.text for s in previous[-2:]),
    )
    return request, sources


def leaf_input(
    job: SummarizeLeaf,
    entries: Sequence[Entry],
    sources: str,
    made: Made,
    previous: Sequence[SummaryRecord] = (),
) -> SummaryInput:
    meta: dict[str, Any] = {"v": 1, "engine": "comal.dag", "reason": job.reason}
    # ENG-1: the model calls it covers (what the cache timing counts a session's calls by).
    meta["calls"] = sum(1 for e in entries if e.role == "assistant")
    if job.request_seq is not None:
        meta["request_seq"] = job.request_seq
    # ENG-2 / BRD-2: the task's state through this chunk (goal, board, work steps, drafts),
    # folded onto the one the summary before it carries, stays beside the summary.
    before = max(previous, key=lambda s: s.last_seq, default=None)
    task = summary_task(before).fold(entries)
    if not task.empty:
        meta["task"] = task.to_dict()
    if task.board is not None:
        meta["board"] = task.board
    if made.rejected:
        meta["rejected"] = list(made.rejected)
    return SummaryInput(
        kind="leaf",
        depth=0,
        first_seq=job.first_seq,
        last_seq=job.last_seq,
        children=(),
        descendant_count=len(entries),
        descendant_tokens=sum(e.tokens for e in entries),
        time_range=(entries[0].created_at, entries[-1].created_at),
        text=made.text,
        summarizer=made.summarizer,
        level=made.level,
        sources_digest=sources_digest(sources),
        meta=meta,
    )


def condense_request(
    job: Condense, children: Sequence[SummaryRecord], previous: Sequence[SummaryRecord]
) -> tuple[SummaryRequest, str]:
    sources = render_children(children)
    request = SummaryRequest(
        sources=sources,
        depth=job.depth,
        target_tokens=job.target_tokens,
        level="normal",
        source_tokens=sum(c.tokens for c in children),
        previous=tuple(s.text for s in previous[-2:]),
    )
    return request, sources


def condensed_input(
    job: Condense, children: Sequence[SummaryRecord], sources: str, made: Made
) -> SummaryInput:
    meta: dict[str, Any] = {"v": 1, "engine": "comal.dag"}
    request_seq = next(
        (c.meta["request_seq"] for c in reversed(children) if "request_seq" in c.meta), None
    )
    if request_seq is not None:
        meta["request_seq"] = request_seq
    calls = [c.meta.get("calls") for c in children]
    meta["calls"] = sum(c if isinstance(c, int) else 0 for c in calls)
    boards = [c.meta["board"] for c in children if isinstance(c.meta.get("board"), dict)]
    if boards:
        meta["board"] = max(boards, key=lambda b: int(b["seq"]))
    task = summary_task(children[-1])
    if not task.empty:
        meta["task"] = task.to_dict()  # the newest child's state holds every older one's
    if made.rejected:
        meta["rejected"] = list(made.rejected)
    return SummaryInput(
        kind="condensed",
        depth=job.depth,
        first_seq=children[0].first_seq,
        last_seq=children[-1].last_seq,
        children=tuple(c.id for c in children),
        descendant_count=sum(c.descendant_count for c in children),
        descendant_tokens=sum(c.descendant_tokens for c in children),
        time_range=(children[0].time_range[0], children[-1].time_range[1]),
        text=made.text,
        summarizer=made.summarizer,
        level=made.level,
        sources_digest=sources_digest(sources),
        meta=meta,
    )
