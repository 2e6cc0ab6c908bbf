"""Running planned jobs through the executor table: against the ledger, or in memory.

:class:`Compactor` runs one pass of jobs for a session against the ledger, each job in its own
transaction through its handler; a summarizer that fails stops the pass (recorded as an event,
nothing written for that job), and a summary another process made first is counted, not
repeated. :func:`execute` is one such pass for callers that need no report. :func:`rehearse`
runs jobs in memory for a replay. Planning — deciding which jobs are due, pass after pass — is
the turn service's (:mod:`comal.turns`); nothing here calls an engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from ..context import Job, Summarizer
from ..ledger import LedgerBackend, Scope, SummaryConflict
from ._dag import SummarizerFailed
from ._handlers import FAILED
from ._table import JobRun, Probe, Rehearsal, SweepReport, handler_for

__all__ = ["Compactor", "execute", "rehearse"]


class Compactor:
    """Runs passes of jobs for one session against the ledger (see the module docstring)."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        summarizer: Summarizer | Callable[[], Summarizer | None] | None,
        config: BaseModel | None,
        *,
        clock: Callable[[], float] = time.time,
        probe: Probe = lambda phase, detail: None,
        still_ours: Callable[[], bool] = lambda: True,
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.config = config
        if summarizer is None or isinstance(summarizer, Summarizer):
            chosen = summarizer

            def factory() -> Summarizer | None:
                return chosen

        else:
            factory = summarizer
        self._factory = factory
        self.clock = clock
        self.probe = probe
        self.still_ours = still_ours
        self._scratch: dict[str, object] = {}

    def run(self, jobs: Sequence[Job], report: SweepReport) -> int:
        """Run ``jobs`` in order; returns how many records they stored."""
        run = JobRun(
            self.ledger, self.scope, self.config, self._factory, report,
            clock=self.clock, probe=self.probe, still_ours=self.still_ours,
            scratch=self._scratch,
        )  # fmt: skip
        made = 0
        for job in jobs:
            if not self.still_ours():
                report.stopped = "lease lost"
                break
            handler = handler_for(job)
            try:
                record = handler.run(run, job)
            except SummarizerFailed as exc:
                report.failed.append(str(exc))
                self.ledger.add_record(self.scope, "event", FAILED, {"v": 1, "error": str(exc)})
                report.stopped = "summarizer failed"
                break
            except SummaryConflict:
                report.conflicts += 1  # another process made it: its summary stands
                continue
            if record is not None:
                report.made.append(record)
                made += 1
        return made


def execute(
    ledger: LedgerBackend,
    scope: Scope,
    jobs: Sequence[Job],
    *,
    summarizer: Summarizer | None = None,
    config: BaseModel | None = None,
) -> tuple[object, ...]:
    """Run ``jobs`` once, in order, against the ledger; the records they stored. A summarizer
    that fails is raised (nothing was written for its job)."""
    report = SweepReport(scope.session)
    Compactor(ledger, scope, summarizer, config).run(jobs, report)
    if report.failed:
        raise SummarizerFailed(report.failed[-1])
    return tuple(report.made)


def rehearse(rehearsal: Rehearsal, jobs: Sequence[Job]) -> tuple[object, ...]:
    """Run ``jobs`` in memory (a replay); ``rehearsal.bases`` gains what they made."""
    made: list[object] = []
    for job in jobs:
        handler = handler_for(job)
        if handler.rehearse is None:
            continue  # a job with nothing to simulate (a plugin's side effect)
        record = handler.rehearse(rehearsal, job)
        if record is not None:
            made.append(record)
    return tuple(made)
