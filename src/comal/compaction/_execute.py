"""Job execution: against the ledger, or in memory for a replay.

Each job kind has one handler pair (ledger, memory); a job no handler knows is a coded error,
never skipped silently. Each ledger job is one transaction: a crash leaves the old state. The
dag engine's jobs (leaf and condensed summaries) and the pipeline's summary need a summarizer:
the extractive one unless the caller gives another.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..context import (
    Bases,
    Execute,
    ExtractiveSummarizer,
    Job,
    StoreCheckpoint,
    Summarizer,
    View,
    proposal_record,
    store_checkpoint,
)
from ..context.dag import Blocked, Condense, DagConfig, SummarizeLeaf
from ..context.dag._plan import _condense
from ..errors import UserError
from ..ledger import LedgerBackend, Scope, SummaryInput, SummaryRecord
from ..messages import sha256_hex
from ..tokens import TokenCounter
from ._dag import condense_request, condensed_input, leaf_input, leaf_request, make_text
from ._pipeline import PIPELINE_JOBS, run_pipeline_job, summarize_pipeline

__all__ = ["JobFailed", "execute", "memory_executor"]


class JobFailed(UserError):
    code = "JOB_FAILED"


def execute(
    ledger: LedgerBackend,
    scope: Scope,
    jobs: Sequence[Job],
    *,
    summarizer: Summarizer | None = None,
    config: DagConfig | None = None,
) -> tuple[object, ...]:
    """Run ``jobs`` in order against the ledger; returns the records they stored."""
    from ._sweep import Compactor, SweepReport

    made: list[object] = []
    compactor: Compactor | None = None
    for job in jobs:
        if isinstance(job, StoreCheckpoint):
            with ledger.atomic():
                made.append(store_checkpoint(ledger, scope, job.proposal))
        elif isinstance(job, (SummarizeLeaf, Condense, Blocked)):
            if compactor is None:
                chosen = summarizer or ExtractiveSummarizer(ledger.counter)
                compactor = Compactor(ledger, scope, chosen, config or DagConfig())
            report = SweepReport(scope.session)
            compactor.run([job], report)
            made += report.made
        elif isinstance(job, PIPELINE_JOBS):
            made.append(run_pipeline_job(ledger, scope, job, summarizer))
        else:
            raise JobFailed(f"no executor for {job.kind} jobs in this comal")
    return tuple(made)


def _record(number: int, session: str, draft: SummaryInput, counter: TokenCounter) -> SummaryRecord:
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
        meta=dict(draft.meta),
        sources_digest=draft.sources_digest,
    )


def memory_executor(
    counter: TokenCounter,
    *,
    summarizer: Summarizer | None = None,
    config: DagConfig | None = None,
) -> Execute:
    """An :data:`~comal.context.Execute` for :func:`~comal.context.replay`: the records it
    makes live in the replay's memory only (negative ids), the ledger is never written.

    Summaries are made as a sweep would make them (the extractive summarizer unless another is
    given), and condensing cascades right after, as a sweep's next passes would."""
    made_count = 0
    summaries_made = 0
    chosen = summarizer or ExtractiveSummarizer(counter)
    dag_config = config or DagConfig(counter=counter)

    def summarize(job: Job, view: View, frontier: list[SummaryRecord]) -> SummaryRecord:
        nonlocal summaries_made
        summaries_made += 1
        number = 2_000_000 + summaries_made
        previous = [s for s in frontier if s.last_seq < getattr(job, "first_seq", 0)]
        if isinstance(job, SummarizeLeaf):
            entries = [e for e in view.entries if job.first_seq <= e.seq <= job.last_seq]
            request, sources = leaf_request(job, entries, previous)
            text = make_text(request, chosen, counter, None, oversize=job.oversize)
            draft = leaf_input(job, entries, sources, text)
        else:
            assert isinstance(job, Condense)
            by_id = {s.id: s for s in frontier}
            children = [by_id[i] for i in job.children]
            request, sources = condense_request(job, children, previous)
            draft = condensed_input(
                job, children, sources, make_text(request, chosen, counter, None)
            )
        return _record(number, view.session or "", draft, counter)

    def fold(frontier: list[SummaryRecord], record: SummaryRecord) -> list[SummaryRecord]:
        if record.kind == "leaf":
            return [*frontier, record]
        first = next(i for i, s in enumerate(frontier) if s.id == record.children[0])
        return [*frontier[:first], record, *frontier[first + len(record.children) :]]

    def run(jobs: Sequence[Job], view: View, bases: Bases) -> tuple[Bases, tuple[object, ...]]:
        nonlocal made_count
        made: list[object] = []
        frontier = list(bases.summaries)
        for job in jobs:
            if isinstance(job, StoreCheckpoint):
                made_count += 1
                # Apart from the ids replay gives the checkpoints assemble proposes.
                number = 1_000_000 + made_count
                record = proposal_record(view.session or "", job.proposal, number, counter)
                bases = Bases(record, bases.summaries)
                made.append(record)
            elif isinstance(job, (SummarizeLeaf, Condense)):
                summary = summarize(job, view, frontier)
                frontier = fold(frontier, summary)
                made.append(summary)
            elif isinstance(job, Blocked):
                continue
            elif isinstance(job, PIPELINE_JOBS):
                made_count += 1
                proposal = summarize_pipeline(job, view.entries, counter, summarizer)
                number = 1_000_000 + made_count
                record = proposal_record(view.session or "", proposal, number, counter)
                bases = Bases(record, bases.summaries)
                made.append(record)
            else:
                raise JobFailed(f"no executor for {job.kind} jobs in this comal")
        if any(isinstance(m, SummaryRecord) for m in made):
            for _ in range(64):  # condensing cascades, bounded as a sweep's passes are
                due = _condense(tuple(frontier), dag_config)
                if not due:
                    break
                summary = summarize(due[0], view, frontier)
                frontier = fold(frontier, summary)
                made.append(summary)
            bases = Bases(bases.checkpoint, tuple(frontier))
        return bases, tuple(made)

    return run
