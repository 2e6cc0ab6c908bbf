"""A fourth context engine, written as a plugin outside comal: everything it needs — the engine,
its own job type and the handler that runs it — lives in this one module, and comal's sources
know nothing of it. ``fold`` assembles like ``limit`` but folds the history into a checkpoint
as soon as more than ``FOLD_AFTER`` entries follow the latest one, through a job of its own."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from comal.compaction import JobHandler, JobRun, Rehearsal
from comal.context import (
    Bases,
    CheckpointProposal,
    EngineCache,
    Job,
    LimitEngine,
    View,
    compact,
    proposal_record,
    store_checkpoint,
)
from comal.plugins import hookimpl
from comal.tokens import Budget

FOLD_AFTER = 6
FOLDED = "fold_folded"


@dataclass(frozen=True, slots=True)
class Fold(Job):
    """Store ``proposal`` as the new checkpoint."""

    proposal: CheckpointProposal


class FoldEngine(LimitEngine):
    name = "fold"
    description = "limit's assembly; folds every few entries into a checkpoint (a test plugin)"

    def plan(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        force: bool = False,
        cache: EngineCache | None = None,
    ) -> tuple[Job, ...]:
        if len(view.entries) <= FOLD_AFTER and not force:
            return ()
        proposal = compact(view, budget, config)  # type: ignore[arg-type]
        return () if proposal is None else (Fold(proposal),)


def _run(run: JobRun, job: Fold) -> object:
    with run.ledger.atomic():
        stored = store_checkpoint(run.ledger, run.scope, job.proposal)
        body = {"v": 1, "checkpoint": stored.id, "last_seq": stored.last_seq}
        run.ledger.add_record(run.scope, "event", FOLDED, body)
    return stored


def _rehearse(r: Rehearsal, job: Fold) -> object:
    record = proposal_record(r.session, job.proposal, r.number(), r.counter)
    r.bases = Bases(record, r.bases.summaries)
    return record


@hookimpl
def comal_engines() -> list[FoldEngine]:
    return [FoldEngine()]


@hookimpl
def comal_job_handlers() -> list[JobHandler]:
    return [JobHandler(Fold, _run, _rehearse)]
