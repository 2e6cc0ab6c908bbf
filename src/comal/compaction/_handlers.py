"""The handlers of comal's own engines' jobs, registered in the executor table like a plugin's.

- ``StoreCheckpoint`` (limit's ``/compact``): store the proposal, inline.
- ``PipelineSummarize``: summarize with the fallback levels and store the summary, inline.
- ``SummarizeLeaf``, ``Condense`` and ``Blocked`` (dag): summaries made under the session's
  lease, in sweeps of several passes; a ``Blocked`` job is said once as an event, never retried.

Every stand-in stored here is an OBS-2 event written in the same transaction (``checkpointed``,
``pipeline_summarized``, ``dag_summarized``, ``dag_condensed``): ``comal events`` shows what
``/compact`` and maintenance did on every surface, and a stand-in never exists without it.
The same transaction holds the memory flush of the entries it compresses (MEM-1,
:func:`comal.memory.remember`, with a model summarizer's extra facts read just before it):
a crash leaves the stand-in, its event and its memories together, or none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..context import (
    Bases,
    CheckpointProposal,
    StoreCheckpoint,
    proposal_record,
    store_checkpoint,
)
from ..context.dag import Blocked, Condense, DagConfig, Deferred, SummarizeLeaf
from ..context.pipeline import PIPELINE_ENGINE, PipelineSummarize
from ..ledger import CheckpointRecord, Entry, SummaryInput, SummaryRecord
from ..memory import Extracted, remember
from ..messages import canonical_json, load_json, sha256_hex
from ..tokens import TokenCounter
from ._dag import condense_request, condensed_input, leaf_input, leaf_request, make_text
from ._guard import Guard
from ._memory import model_facts
from ._pipeline import summarize_pipeline
from ._table import JobFailed, JobHandler, JobRun, Rehearsal

__all__ = [
    "BLOCKED",
    "CHECKPOINTED",
    "CONDENSED",
    "DEFERRED",
    "FAILED",
    "PIPELINE_SUMMARIZED",
    "SUMMARIZED",
    "builtin_handlers",
    "stored_kind",
]

SUMMARIZED = "dag_summarized"
CONDENSED = "dag_condensed"
BLOCKED = "dag_blocked"
DEFERRED = "dag_deferred"
FAILED = "dag_summarizer_failed"
# The kind an assembly's own checkpoint is recorded under (comal.turns' EVENT_KINDS).
CHECKPOINTED = "checkpointed"
PIPELINE_SUMMARIZED = "pipeline_summarized"


def _store_checkpoint(
    run: JobRun,
    proposal: CheckpointProposal,
    kind: str,
    body: dict[str, Any],
    sources: tuple[int, int],
    entries: Sequence[Entry] | None = None,
    extra: Extracted | None = None,
) -> CheckpointRecord:
    with run.ledger.atomic():
        remember(run.ledger, run.scope, *sources, kind, entries=entries, extra=extra)
        record = store_checkpoint(run.ledger, run.scope, proposal)
        event = {
            "v": 1,
            "kind": kind,
            "checkpoint": record.id,
            "first_seq": record.first_seq,
            "last_seq": record.last_seq,
            "tokens": record.tokens,
            "count": 1,
            **body,
        }
        run.ledger.add_record(run.scope, "event", kind, event)
    run.probe("stored", f"checkpoint {record.id}")
    return record


# -- limit ------------------------------------------------------------------------------------
def _store(run: JobRun, job: StoreCheckpoint) -> object:
    span = (job.proposal.first_seq, job.proposal.last_seq)
    return _store_checkpoint(run, job.proposal, CHECKPOINTED, {"job": "StoreCheckpoint"}, span)


def _rehearse_store(r: Rehearsal, job: StoreCheckpoint) -> object:
    record = proposal_record(r.session, job.proposal, r.number(), r.counter)
    r.bases = Bases(record, r.bases.summaries)
    return record


# -- pipeline ---------------------------------------------------------------------------------
def _pipeline(run: JobRun, job: PipelineSummarize) -> object:
    entries = run.ledger.entries(run.scope, start_seq=job.source_first, end_seq=job.last_seq)
    span = (job.source_first, job.last_seq)
    proposal = summarize_pipeline(job, entries, run.counter, run.summarizer())
    # The facts call follows the summary: a summary that fails compresses nothing to remember.
    extra = model_facts(run.ledger, run.scope, *span, run.summarizer(), entries=entries)
    meta = proposal.meta
    body = {"level": meta.get("level"), "summarizer": meta.get("summarizer")}
    return _store_checkpoint(run, proposal, PIPELINE_SUMMARIZED, body, span, entries, extra)


def _rehearse_pipeline(r: Rehearsal, job: PipelineSummarize) -> object:
    proposal = summarize_pipeline(job, r.view.entries, r.counter, r.summarizer)
    record = proposal_record(r.session, proposal, r.number(), r.counter)
    r.bases = Bases(record, r.bases.summaries)
    return record


# -- dag --------------------------------------------------------------------------------------
def _dag_config(config: object) -> DagConfig:
    if not isinstance(config, DagConfig):
        raise JobFailed(
            f"dag jobs need the dag engine's configuration, not {type(config).__name__}: run "
            "them through the session's turn service (comal.turns)"
        )
    return config


def _guard(run: JobRun) -> Guard:
    """One spend guard per execution: the caps and breaker are read through the ledger."""
    guard = run.scratch.get("dag.guard")
    if not isinstance(guard, Guard):
        guard = Guard(run.ledger, run.scope, _dag_config(run.config), clock=run.clock)
        run.scratch["dag.guard"] = guard
    return guard


def _earlier(run: JobRun, first_seq: int) -> list[SummaryRecord]:
    frontier = run.ledger.summary_frontier(run.scope)
    return [s for s in frontier if s.last_seq < first_seq]


def _summarizer(run: JobRun) -> Any:
    chosen = run.summarizer()
    if chosen is None:
        from ..context import ExtractiveSummarizer

        chosen = ExtractiveSummarizer(run.counter)
    return chosen


def _leaf(run: JobRun, job: SummarizeLeaf) -> object:
    ledger, scope = run.ledger, run.scope
    entries = ledger.entries(scope, start_seq=job.first_seq, end_seq=job.last_seq)
    earlier = _earlier(run, job.first_seq)
    request, sources = leaf_request(job, entries, earlier)
    span = f"{job.first_seq}..{job.last_seq}"
    run.probe("summarizing", span)
    made = make_text(request, _summarizer(run), run.counter, _guard(run), oversize=job.oversize)
    run.probe("summarized", span)
    # After the summary, so a failing model costs one call, not two; a step over the
    # summarizer's window is not sent to it at all.
    extra = None
    if not job.oversize:
        extra = model_facts(ledger, scope, job.first_seq, job.last_seq, run.summarizer(),
                            entries=entries, guard=_guard(run))  # fmt: skip
    draft = leaf_input(job, entries, sources, made, earlier)
    body = {"first_seq": job.first_seq, "last_seq": job.last_seq}
    return _store_summary(run, draft, SUMMARIZED, body, entries, extra)


def _condense(run: JobRun, job: Condense) -> object | None:
    children = [run.ledger.summary(run.scope, i) for i in job.children]
    found = [c for c in children if c is not None]
    if len(found) != len(job.children):
        return None  # another process condensed them first
    request, sources = condense_request(job, found, _earlier(run, job.first_seq))
    run.probe("summarizing", f"condense {job.children}")
    made = make_text(request, _summarizer(run), run.counter, _guard(run))
    run.probe("summarized", f"condense {job.children}")
    # Its leaves remembered their entries; only a ledger older than memories has any left.
    extra = model_facts(run.ledger, run.scope, job.first_seq, job.last_seq, run.summarizer(),
                        guard=_guard(run))  # fmt: skip
    draft = condensed_input(job, found, sources, made)
    body = {"children": list(job.children), "depth": job.depth}
    return _store_summary(run, draft, CONDENSED, body, None, extra)


def _store_summary(
    run: JobRun,
    draft: SummaryInput,
    kind: str,
    body: dict[str, Any],
    entries: Sequence[Entry] | None,
    extra: Extracted | None,
) -> object:
    with run.ledger.atomic():
        first, last = draft.first_seq, draft.last_seq
        remember(run.ledger, run.scope, first, last, kind, entries=entries, extra=extra)
        record = run.ledger.add_summary(run.scope, draft)
        event = {"v": 1, "summary": record.id, "level": record.level, **body}
        run.ledger.add_record(run.scope, "event", kind, event)
    run.probe("stored", str(record.id))
    return record


def _blocked(run: JobRun, job: Blocked) -> None:
    run.report.blocked.append(job)
    events = run.ledger.records(run.scope, "event", kinds=(BLOCKED,))
    if events and events[-1].body.get("message") == job.message:
        return None  # said once, not every turn
    body = {"v": 1, "code": job.code, "message": job.message}
    run.ledger.add_record(run.scope, "event", BLOCKED, body)
    return None


def _deferred(run: JobRun, job: Deferred) -> None:
    """ENG-1: the debt recorded, once per frontier (the next compaction pays it)."""
    events = run.ledger.records(run.scope, "event", kinds=(DEFERRED,))
    if events and events[-1].body.get("frontier_seq") == job.frontier_seq:
        return None
    body = {
        "v": 1,
        "history_tokens": job.history_tokens,
        "trigger_tokens": job.trigger_tokens,
        "hard_tokens": job.hard_tokens,
        "pays_back_after": job.pays_back_after,
        "calls": job.calls,
        "frontier_seq": job.frontier_seq,
    }
    run.ledger.add_record(run.scope, "event", DEFERRED, body)
    return None


def _memory_summary(
    number: int, session: str, draft: SummaryInput, counter: TokenCounter
) -> SummaryRecord:
    return SummaryRecord(
        id=-number,
        session=session,
        depth=draft.depth,
        kind=draft.kind,
        first_seq=draft.first_seq,
        last_seq=draft.last_seq,
        children=draft.children,
        descendant_count=draft.descendant_count,
        descendant_tokens=draft.descendant_tokens,
        time_range=draft.time_range,
        tokens=counter.count(draft.text),
        summarizer=draft.summarizer,
        level=draft.level,
        digest=sha256_hex(draft.text),
        created_at=datetime.fromtimestamp(0, UTC).isoformat(),
        text=draft.text,
        meta=load_json(canonical_json(dict(draft.meta))),  # as the ledger stores it
        sources_digest=draft.sources_digest,
    )


def _memory_summarizer(r: Rehearsal) -> Any:
    if r.summarizer is not None:
        return r.summarizer
    from ..context import ExtractiveSummarizer

    return ExtractiveSummarizer(r.counter)


def _rehearse_leaf(r: Rehearsal, job: SummarizeLeaf) -> object:
    frontier = list(r.bases.summaries)
    live = r.recorded("leaf", job.first_seq, job.last_seq)
    if live is not None:
        r.bases = Bases(r.bases.checkpoint, (*frontier, live))
        return live
    previous = [s for s in frontier if s.last_seq < job.first_seq]
    entries = [e for e in r.view.entries if job.first_seq <= e.seq <= job.last_seq]
    request, sources = leaf_request(job, entries, previous)
    text = make_text(request, _memory_summarizer(r), r.counter, None, oversize=job.oversize)
    record = _memory_summary(
        r.number(), r.session, leaf_input(job, entries, sources, text, previous), r.counter
    )
    r.bases = Bases(r.bases.checkpoint, (*frontier, record))
    return record


def _rehearse_condense(r: Rehearsal, job: Condense) -> object | None:
    frontier = list(r.bases.summaries)
    by_id = {s.id: s for s in frontier}
    if any(i not in by_id for i in job.children):
        return None
    children = [by_id[i] for i in job.children]
    record = r.recorded("condensed", tuple(job.children))
    if record is None:
        previous = [s for s in frontier if s.last_seq < job.first_seq]
        request, sources = condense_request(job, children, previous)
        made = make_text(request, _memory_summarizer(r), r.counter, None)
        draft = condensed_input(job, children, sources, made)
        record = _memory_summary(r.number(), r.session, draft, r.counter)
    first = frontier.index(children[0])
    folded = (*frontier[:first], record, *frontier[first + len(children) :])
    r.bases = Bases(r.bases.checkpoint, folded)
    return record


def stored_kind(record: object) -> str:
    """The event kind a stand-in made by one of these handlers is recorded under, for a
    replay to say what a live run would have recorded."""
    if isinstance(record, SummaryRecord):
        return SUMMARIZED if record.kind == "leaf" else CONDENSED
    if isinstance(record, CheckpointRecord):
        pipeline = record.meta.get("engine") == PIPELINE_ENGINE
        return PIPELINE_SUMMARIZED if pipeline else CHECKPOINTED
    return f"stored_{type(record).__name__.lower()}"  # a plugin's own stand-in


def builtin_handlers() -> tuple[JobHandler, ...]:
    """The handlers of the limit, dag and pipeline engines' jobs."""
    return (
        JobHandler(StoreCheckpoint, _store, _rehearse_store),
        JobHandler(PipelineSummarize, _pipeline, _rehearse_pipeline),
        JobHandler(SummarizeLeaf, _leaf, _rehearse_leaf, lease=True),
        JobHandler(Condense, _condense, _rehearse_condense, lease=True),
        JobHandler(Blocked, _blocked, lambda r, job: None, lease=True),
        JobHandler(Deferred, _deferred, None),
    )
