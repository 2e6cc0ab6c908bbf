"""Job execution: against the ledger, or in memory for a replay.

Each job kind has one handler pair (ledger, memory); a job no handler knows is a coded error,
never skipped silently. Each ledger job is one transaction: a crash leaves the old state.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..context import (
    Bases,
    Execute,
    Job,
    StoreCheckpoint,
    Summarizer,
    View,
    proposal_record,
    store_checkpoint,
)
from ..errors import UserError
from ..ledger import LedgerBackend, Scope
from ..tokens import TokenCounter
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
) -> tuple[object, ...]:
    """Run ``jobs`` in order against the ledger; returns the records they stored.
    ``summarizer``: for jobs that summarize (the deterministic extractive one when None)."""
    made: list[object] = []
    for job in jobs:
        if isinstance(job, StoreCheckpoint):
            with ledger.atomic():
                made.append(store_checkpoint(ledger, scope, job.proposal))
        elif isinstance(job, PIPELINE_JOBS):
            made.append(run_pipeline_job(ledger, scope, job, summarizer))
        else:
            raise JobFailed(f"no executor for {job.kind} jobs in this comal")
    return tuple(made)


def memory_executor(counter: TokenCounter, *, summarizer: Summarizer | None = None) -> Execute:
    """An :data:`~comal.context.Execute` for :func:`~comal.context.replay`: the records it
    makes live in the replay's memory only (negative ids), the ledger is never written."""
    made_count = 0

    def run(jobs: Sequence[Job], view: View, bases: Bases) -> tuple[Bases, tuple[object, ...]]:
        nonlocal made_count
        made: list[object] = []
        for job in jobs:
            if isinstance(job, StoreCheckpoint):
                made_count += 1
                # Apart from the ids replay gives the checkpoints assemble proposes.
                number = 1_000_000 + made_count
                record = proposal_record(view.session or "", job.proposal, number, counter)
                bases = Bases(record, bases.summaries)
                made.append(record)
            elif isinstance(job, PIPELINE_JOBS):
                made_count += 1
                proposal = summarize_pipeline(job, view.entries, counter, summarizer)
                number = 1_000_000 + made_count
                record = proposal_record(view.session or "", proposal, number, counter)
                bases = Bases(record, bases.summaries)
                made.append(record)
            else:
                raise JobFailed(f"no executor for {job.kind} jobs in this comal")
        return bases, tuple(made)

    return run
