"""Sweeps: passes of maintenance under the session's lease (DAG-1..3, DAG-8).

:func:`sweep_passes` is one bounded round of compaction for a session: it takes the session's
lease (a row in the ledger, so it holds across processes; a heartbeat thread renews it), then
asks its caller's ``plan`` for the jobs due and runs them (:class:`Compactor`), pass after pass,
until nothing is due, a pass made nothing, the pass limit or the deadline is reached, or the
lease is lost; it always releases the lease. :class:`Background` runs one sweep at a time per
owner off the caller's thread, so a reply is never held up by compaction.

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
from dataclasses import dataclass

from pydantic import BaseModel

from ..context import Job, Summarizer
from ..ledger import LedgerBackend, Scope
from ._execute import Compactor
from ._table import Probe, SweepReport

__all__ = ["Background", "SweepLimits", "sweep_passes"]


@dataclass(frozen=True, slots=True)
class SweepLimits:
    """The bounds of one sweep: its lease's lifetime, its passes and its deadline. An engine's
    configuration sets them with fields of these names; the defaults hold otherwise."""

    lease_ttl_s: float = 20.0
    max_passes: int = 16
    deadline_s: float = 300.0

    @classmethod
    def of(cls, config: object) -> SweepLimits:
        d = cls()
        return cls(
            float(getattr(config, "lease_ttl_s", d.lease_ttl_s)),
            int(getattr(config, "max_passes_per_sweep", d.max_passes)),
            float(getattr(config, "sweep_deadline_s", d.deadline_s)),
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


def sweep_passes(
    ledger: LedgerBackend,
    scope: Scope,
    plan: Callable[[bool], Sequence[Job]],
    config: BaseModel | None,
    summarizer: Summarizer | Callable[[], Summarizer | None] | None,
    *,
    force: bool = False,
    owner: str | None = None,
    clock: Callable[[], float] = time.time,
    probe: Probe = lambda phase, detail: None,
) -> SweepReport:
    """One bounded round of maintenance for ``scope``; ``plan(force)`` gives each pass's jobs
    (``force`` only on the first pass). See the module docstring."""
    report = SweepReport(scope.session)
    limits = SweepLimits.of(config)
    owner = owner or f"comal-{uuid.uuid4()}"
    if not ledger.acquire_lease(scope, owner, limits.lease_ttl_s, now=clock()):
        held = ledger.lease(scope)
        report.stopped = f"lease held by {held.owner}" if held is not None else "lease held"
        return report
    probe("leased", owner)
    try:
        with _Heartbeat(ledger, scope, owner, limits.lease_ttl_s) as beat:
            compactor = Compactor(
                ledger, scope, summarizer, config, clock=clock, probe=probe,
                still_ours=lambda: not beat.lost,
            )  # fmt: skip
            deadline = clock() + limits.deadline_s
            report.stopped = "passes"
            for n in range(limits.max_passes):
                if clock() > deadline:
                    report.stopped = "deadline"
                    break
                jobs = plan(force and n == 0)
                if not any(j.actionable for j in jobs):
                    compactor.run(jobs, report)
                    report.stopped = jobs[0].stop_reason if jobs else "done"
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
