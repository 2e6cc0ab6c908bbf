"""Running the dag engine's maintenance: jobs, sweeps, the lease, deferral (DAG-1..3, DAG-8).

:class:`Compactor` runs planned jobs against the ledger, each summary in its own transaction
together with its event (OBS-2). :func:`sweep` is one bounded round of compaction for a session:
it takes the session's lease (a row in the ledger, so it holds across processes; a heartbeat
thread renews it), then plans and runs passes until nothing is due, a pass made nothing, the
pass limit or the deadline is reached, or the lease is lost; it always releases the lease.
:class:`Maintainer` is what an agent calls after each turn: inline (``defer_compaction =
false``) or on a per-process background thread that runs one sweep at a time per session
(``true``, the default), so the reply is never held up.

Pending work needs no bookkeeping: plans are derived from the ledger, so whatever a dead
process left undone is planned again by the next one, and a summary is either wholly stored or
absent.
"""

from __future__ import annotations

import atexit
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..context import Engine, EngineCache, Job, Summarizer, View
from ..context.dag import Blocked, Condense, DagConfig, Evicted, SummarizeLeaf
from ..ledger import LedgerBackend, Scope, SummaryConflict, SummaryRecord
from ..tokens import Budget
from ._dag import (
    SummarizerFailed,
    condense_request,
    condensed_input,
    leaf_input,
    leaf_request,
    make_text,
)
from ._guard import Guard

__all__ = ["Background", "Compactor", "Maintainer", "SweepReport", "sweep"]

Probe = Callable[[str, str], None]

SUMMARIZED = "dag_summarized"
CONDENSED = "dag_condensed"
EVICTED = "dag_evicted"
BLOCKED = "dag_blocked"
FAILED = "dag_summarizer_failed"


@dataclass
class SweepReport:
    session: str
    made: list[SummaryRecord] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    conflicts: int = 0
    passes: int = 0
    stopped: str = "done"

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "made": [
                {
                    "id": s.id,
                    "depth": s.depth,
                    "kind": s.kind,
                    "sources": [s.first_seq, s.last_seq] if s.kind == "leaf" else list(s.children),
                    "tokens": s.tokens,
                    "summarizer": s.summarizer,
                    "level": s.level,
                }
                for s in self.made
            ],
            "blocked": [{"code": b.code, "message": b.message} for b in self.blocked],
            "failed": self.failed,
            "conflicts": self.conflicts,
            "passes": self.passes,
            "stopped": self.stopped,
        }


class Compactor:
    """Runs dag jobs for one session against the ledger."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        summarizer: Summarizer,
        config: DagConfig,
        *,
        clock: Callable[[], float] = time.time,
        probe: Probe = lambda phase, detail: None,
        still_ours: Callable[[], bool] = lambda: True,
    ) -> None:
        self.ledger = ledger
        self.scope = scope
        self.summarizer = summarizer
        self.config = config
        self.counter = ledger.counter
        self.guard = Guard(ledger, scope, config, clock=clock)
        self.probe = probe
        self.still_ours = still_ours

    def run(self, jobs: Sequence[Job], report: SweepReport) -> int:
        """Run ``jobs`` in order; returns how many summaries they stored."""
        made = 0
        for job in jobs:
            if not self.still_ours():
                report.stopped = "lease lost"
                break
            if isinstance(job, Blocked):
                self._blocked(job, report)
                continue
            try:
                record = self._one(job)
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

    def _one(self, job: Job) -> SummaryRecord | None:
        body: dict[str, Any]
        if isinstance(job, SummarizeLeaf):
            entries = self.ledger.entries(self.scope, start_seq=job.first_seq, end_seq=job.last_seq)
            previous = [
                s for s in self.ledger.summary_frontier(self.scope) if s.last_seq < job.first_seq
            ]
            request, sources = leaf_request(job, entries, previous)
            self.probe("summarizing", f"{job.first_seq}..{job.last_seq}")
            made = make_text(
                request, self.summarizer, self.counter, self.guard, oversize=job.oversize
            )
            self.probe("summarized", f"{job.first_seq}..{job.last_seq}")
            draft = leaf_input(job, entries, sources, made)
            kind, body = SUMMARIZED, {"first_seq": job.first_seq, "last_seq": job.last_seq}
        elif isinstance(job, Condense):
            children = [self.ledger.summary(self.scope, i) for i in job.children]
            found = [c for c in children if c is not None]
            if len(found) != len(job.children):
                return None
            previous = [
                s for s in self.ledger.summary_frontier(self.scope) if s.last_seq < job.first_seq
            ]
            request, sources = condense_request(job, found, previous)
            self.probe("summarizing", f"condense {job.children}")
            made = make_text(request, self.summarizer, self.counter, self.guard)
            self.probe("summarized", f"condense {job.children}")
            draft = condensed_input(job, found, sources, made)
            kind, body = CONDENSED, {"children": list(job.children), "depth": job.depth}
        else:
            from ._execute import JobFailed

            raise JobFailed(f"no executor for {job.kind} jobs in this comal")
        with self.ledger.atomic():
            record = self.ledger.add_summary(self.scope, draft)
            self.ledger.add_record(
                self.scope,
                "event",
                kind,
                {"v": 1, "summary": record.id, "level": record.level, **body},
            )
        self.probe("stored", str(record.id))
        return record

    def _blocked(self, job: Blocked, report: SweepReport) -> None:
        report.blocked.append(job)
        events = self.ledger.records(self.scope, "event", kinds=(BLOCKED,))
        if events and events[-1].body.get("message") == job.message:
            return  # said once, not every turn
        self.ledger.add_record(
            self.scope, "event", BLOCKED, {"v": 1, "code": job.code, "message": job.message}
        )


class _Heartbeat:
    """Renews the lease every third of its TTL while a sweep runs."""

    def __init__(self, ledger: LedgerBackend, scope: Scope, owner: str, ttl: float) -> None:
        self.ledger, self.scope, self.owner, self.ttl = ledger, scope, owner, ttl
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="comal-lease", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not self.ledger.renew_lease(self.scope, self.owner, self.ttl):
                    self.lost = True
                    return
            except Exception:  # a closed ledger at shutdown: the lease simply expires
                self.lost = True
                return

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def sweep(
    ledger: LedgerBackend,
    scope: Scope,
    engine: Engine,
    config: DagConfig,
    budget: Budget,
    summarizer: Summarizer,
    *,
    force: bool = False,
    owner: str | None = None,
    clock: Callable[[], float] = time.time,
    probe: Probe = lambda phase, detail: None,
) -> SweepReport:
    """One bounded round of compaction for ``scope``; see the module docstring."""
    report = SweepReport(scope.session)
    owner = owner or f"comal-{uuid.uuid4()}"
    if not ledger.acquire_lease(scope, owner, config.lease_ttl_s, now=clock()):
        held = ledger.lease(scope)
        report.stopped = f"lease held by {held.owner}" if held is not None else "lease held"
        return report
    probe("leased", owner)
    try:
        with _Heartbeat(ledger, scope, owner, config.lease_ttl_s) as beat:
            compactor = Compactor(
                ledger, scope, summarizer, config, clock=clock, probe=probe,
                still_ours=lambda: not beat.lost,
            )  # fmt: skip
            deadline = clock() + config.sweep_deadline_s
            report.stopped = "passes"
            for n in range(config.max_passes_per_sweep):
                if clock() > deadline:
                    report.stopped = "deadline"
                    break
                view = View.from_ledger(ledger, scope, bases=engine.bases)
                jobs = engine.plan(view, budget, config, force=force and n == 0)
                if not any(not isinstance(j, Blocked) for j in jobs):
                    compactor.run(jobs, report)
                    report.stopped = "blocked" if jobs else "done"
                    break
                report.passes += 1
                if compactor.run(jobs, report) == 0:
                    if report.stopped == "passes":
                        report.stopped = "no saving"
                    break
                if report.stopped != "passes":
                    break
    finally:
        ledger.release_lease(scope, owner)
    return report


class Background:
    """One compaction at a time per owner, off the caller's thread (DAG-8); a request made
    while one runs makes it run once more afterwards. Drained (bounded) at interpreter exit."""

    def __init__(self, drain_s: float = 30.0) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._again = False
        self._drain_s = drain_s
        self._registered = False
        self.errors: list[BaseException] = []

    def submit(self, work: Callable[[], object]) -> None:
        with self._lock:
            if not self._registered:  # only owners that ever defer work wait at exit
                atexit.register(self.drain, self._drain_s)
                self._registered = True
            if self._thread is not None and self._thread.is_alive():
                self._again = True
                return
            self._thread = threading.Thread(
                target=self._loop, args=(work,), name="comal-compaction", daemon=True
            )
            self._thread.start()

    def _loop(self, work: Callable[[], object]) -> None:
        while True:
            try:
                work()
            except BaseException as exc:  # kept for the owner to see; never kills the turn
                self.errors.append(exc)
            with self._lock:
                if not self._again:
                    return
                self._again = False

    def drain(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


def _with_summarizer_window(config: Any, session_model: str | None) -> Any:
    """A provider summarizer's window from the model catalog, so leaf chunks are clamped to it
    (DAG-1), unless the configuration gives one."""
    if not isinstance(config, DagConfig) or config.summarizer != "provider":
        return config
    if config.summarizer_window_tokens:
        return config
    model = config.summarizer_model or session_model
    if not model:
        return config
    from ..tokens import resolve_window

    window = resolve_window(model).window
    return config.model_copy(update={"summarizer_window_tokens": window})


class Maintainer:
    """What an agent runs after each turn, for any engine (see the module docstring)."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        engine: Engine,
        config: Any,
        summarizer: Callable[[], Summarizer],
        *,
        say: Callable[[str, str], None] = lambda kind, text: None,
        summarizer_model: str | None = None,
        cache: EngineCache | None = None,
    ) -> None:
        self.cache = cache  # the agent's: planning reuses what assembling remembered
        self.ledger = ledger
        self.scope = scope
        self.engine = engine
        self.config = _with_summarizer_window(config, summarizer_model)
        self.summarizer = summarizer
        self.say = say
        self.background = Background()
        self.owner = f"comal-{uuid.uuid4()}"
        self._evicted_at: int | None = None

    def after_turn(
        self, view: View, budget: Budget, evicted: Evicted | None = None
    ) -> tuple[object, ...]:
        if not isinstance(self.config, DagConfig):
            from ._execute import execute

            jobs = self.engine.plan(view, budget, self.config, cache=self.cache)
            return execute(self.ledger, self.scope, jobs) if jobs else ()
        if evicted is not None and evicted.decided_at != self._evicted_at:
            self._evicted_at = evicted.decided_at
            self.ledger.add_record(
                self.scope,
                "event",
                EVICTED,
                {"v": 1, "tokens": evicted.tokens, "summaries": list(evicted.summaries),
                 "first_seq": evicted.first_seq, "last_seq": evicted.last_seq},
            )  # fmt: skip
        jobs = self.engine.plan(view, budget, self.config, cache=self.cache)
        if not jobs:
            return ()
        config: DagConfig = self.config

        def work() -> SweepReport:
            report = sweep(
                self.ledger, self.scope, self.engine, config, budget, self.summarizer(),
                owner=self.owner,
            )  # fmt: skip
            for s in report.made:
                self.say(
                    "note", f"summary {s.id} (depth {s.depth}) for seq {s.first_seq}..{s.last_seq}"
                )
            for b in report.blocked:
                self.say("warn", f"{b.code}: {b.message}")
            return report

        if config.defer_compaction:
            self.background.submit(work)
            return ()
        return tuple(work().made)
