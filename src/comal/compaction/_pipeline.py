"""Running the pipeline engine's summary job (PIP-1 layer 7 of the source, PIP-4).

The job names the entries to summarize; here they are rendered as untrusted source text and
handed to a :class:`~comal.context.Summarizer` (the pipeline's extractive one when none is
given) with the three-level fallback: a full summary; if that fails or comes back too large, a
simplified one from sources without the oversized content; and if that fails too, a count-only
note that always fits. The executor table's handler stores the result in the checkpoints table
with the pipeline's meta and its event (one transaction), or a replay keeps it in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..context import (
    CheckpointProposal,
    Level,
    Summarizer,
    SummaryRequest,
    SummaryText,
)
from ..context._render import message_tokens
from ..context.pipeline import (
    PIPELINE_ENGINE,
    PIPELINE_VERSION,
    PipelineExtractive,
    PipelineSummarize,
    render_sources,
    summary_message,
)
from ..ledger import Entry
from ..tokens import TokenCounter

__all__ = ["PIPELINE_JOBS", "summarize_pipeline"]

PIPELINE_JOBS = (PipelineSummarize,)

# The simplified level reads each output's first characters only: that is what "excludes
# oversized content" means here.
_SIMPLIFIED_CHARS = 120


def _count_only(job: PipelineSummarize, entries: int) -> str:
    return (
        f"{entries} messages (seq {job.source_first}..{job.last_seq}) were condensed with no "
        "summary text: both summarizer levels failed or came back too large. Nothing is lost: "
        "session_search(query=...) finds anything in them."
    )


def _attempt(
    summarizer: Summarizer, request: SummaryRequest, counter: TokenCounter
) -> tuple[SummaryText | None, str]:
    try:
        out = summarizer.summarize(request)
    except Exception as exc:  # a summarizer failing is what the fallback is for
        return None, f"{request.level}: {type(exc).__name__}: {exc}"[:300]
    if out.truncated:
        return None, f"{request.level}: cut short at the summarizer's output limit"
    text = out.text.strip()
    tokens = counter.count(text)
    too_big = tokens > max(request.target_tokens * 3 // 2, 64) or tokens >= request.source_tokens
    if not text or too_big:
        return None, f"{request.level}: {tokens} tokens for a target of {request.target_tokens}"
    return SummaryText(text, out.summarizer, out.input_tokens, out.output_tokens), ""


def summarize_pipeline(
    job: PipelineSummarize,
    entries: Sequence[Entry],
    counter: TokenCounter,
    summarizer: Summarizer | None = None,
) -> CheckpointProposal:
    """The summary proposal for ``job`` over ``entries`` (those in its source range are used)."""
    sources = [e for e in entries if job.source_first <= e.seq <= job.last_seq]
    chosen = summarizer if summarizer is not None else PipelineExtractive(counter)
    failures: list[str] = []
    made: SummaryText | None = None
    level: Level = "count-only"
    for attempt_level, limit in (("normal", 600), ("aggressive", _SIMPLIFIED_CHARS)):
        request = SummaryRequest(
            sources=render_sources(sources, limit=limit),
            depth=0,
            target_tokens=job.target_tokens,
            level=attempt_level,  # type: ignore[arg-type]
            source_tokens=max(job.source_tokens, 1),
            previous=job.previous,
        )
        made, why = _attempt(chosen, request, counter)
        if made is not None:
            level = attempt_level  # type: ignore[assignment]
            break
        failures.append(why)
    if made is None and getattr(chosen, "spends", False):
        # ENG-3: a model whose texts may not be stored: the extractive summary stands in,
        # bounded by the target and named as what made it; the count-only note is the floor.
        request = replace(request, sources=render_sources(sources, limit=600), level="aggressive")
        made, why = _attempt(PipelineExtractive(counter), request, counter)
        level = "aggressive"
        if made is None:
            failures.append(f"extractive: {why}")
    if made is None:
        level = "count-only"
        made = SummaryText(_count_only(job, len(sources)), "count-only")
    covered = len(sources) + (1 if job.previous else 0)
    message, offset, chars = summary_message(job, made.text, level, made.summarizer, covered)
    meta: dict[str, Any] = {
        "engine": PIPELINE_ENGINE,
        "version": PIPELINE_VERSION,
        "keeps_head": job.keeps_head,
        "made_at_seq": job.made_at_seq,
        "level": level,
        "summarizer": made.summarizer,
        "body_offset": offset,
        "body_chars": chars,
        "source_first": job.source_first,
        "source_entries": len(sources),
        "source_tokens": job.source_tokens,
        "head_entries": job.head_entries,
        "reason": job.reason,
        "restore": job.restore.as_dict(),
    }
    if failures:
        meta["fallbacks"] = failures
    if made.input_tokens is not None:
        meta["summarizer_tokens"] = {"input": made.input_tokens, "output": made.output_tokens}
    tokens = message_tokens(counter, message)
    return CheckpointProposal(message, job.first_seq, job.last_seq, tokens, meta)
