"""The executor table: each job type an engine plans, mapped to the handler that runs it.

Engines are pure and only *say* what maintenance is due (:class:`~comal.context.Job` values);
the handlers here *do* it. A :class:`JobHandler` names its job type and how it runs:

- ``run(run, job)`` against the ledger, in one transaction per job (a crash leaves the old
  state), with what :class:`JobRun` carries for that execution: the ledger and scope, the
  engine's configuration, the configured summarizer (built on first use), the report to fill,
  and a ``scratch`` dictionary where one engine's handlers keep state for the execution (the
  dag's spend guard);
- ``rehearse(rehearsal, job)`` in memory, for a replay: the records it makes live in the
  :class:`Rehearsal` only (negative ids), the ledger is never written;
- ``lease``: whether the job runs in a sweep under the session's lease (several passes, each
  planned again from the ledger, possibly on a background thread) rather than inline.

Handlers reach the table through the plugin seam (the ``comal_job_handlers`` hook): comal's own
engines register theirs exactly as a plugin's engine would, so a new engine is its own package
and nothing here names it. A job no handler knows is a coded error (``JOB_FAILED``), never
skipped silently.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from ..context import Bases, Job, Summarizer, View
from ..errors import UserError
from ..ledger import LedgerBackend, Scope, SummaryRecord
from ..tokens import TokenCounter

__all__ = [
    "JobFailed",
    "JobHandler",
    "JobRun",
    "Rehearsal",
    "SweepReport",
    "handler_for",
    "handler_table",
    "summary_key",
]

Probe = Callable[[str, str], None]


class JobFailed(UserError):
    code = "JOB_FAILED"


@dataclass
class SweepReport:
    """What one execution did: the records made, what was blocked or failed, and why it
    stopped (``done``, ``no saving``, ``passes``, ``deadline``, ``blocked``, ``lease lost``,
    ``summarizer failed``, ``lease held by …``)."""

    session: str
    made: list[object] = field(default_factory=list)
    blocked: list[Any] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    conflicts: int = 0
    passes: int = 0
    stopped: str = "done"

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "made": [made_dict(m) for m in self.made],
            "blocked": [
                {"code": getattr(b, "code", ""), "message": getattr(b, "message", "")}
                for b in self.blocked
            ],
            "failed": self.failed,
            "conflicts": self.conflicts,
            "passes": self.passes,
            "stopped": self.stopped,
        }


def made_dict(record: object) -> dict[str, Any]:
    """A record a sweep made, as in ``comal compact --json``."""
    if isinstance(record, SummaryRecord):
        return {
            "id": record.id,
            "depth": record.depth,
            "kind": record.kind,
            "sources": [record.first_seq, record.last_seq]
            if record.kind == "leaf"
            else list(record.children),
            "tokens": record.tokens,
            "summarizer": record.summarizer,
            "level": record.level,
        }
    return {"kind": type(record).__name__, "id": getattr(record, "id", None)}


@dataclass
class JobRun:
    """One execution against the ledger (one inline execution, or one sweep)."""

    ledger: LedgerBackend
    scope: Scope
    config: BaseModel | None
    summarizer_factory: Callable[[], Summarizer | None]
    report: SweepReport
    clock: Callable[[], float] = time.time
    probe: Probe = lambda phase, detail: None
    still_ours: Callable[[], bool] = lambda: True
    scratch: dict[str, Any] = field(default_factory=dict)
    _summarizer: Summarizer | None = field(default=None, init=False, repr=False)
    _built: bool = field(default=False, init=False, repr=False)

    @property
    def counter(self) -> TokenCounter:
        return self.ledger.counter

    def summarizer(self) -> Summarizer | None:
        """The configured summarizer, built once per execution when a job first needs it;
        ``None``: the engine's own offline default."""
        if not self._built:
            self._summarizer, self._built = self.summarizer_factory(), True
        return self._summarizer


@dataclass
class Rehearsal:
    """A replay's execution in memory: ``bases`` are the stand-ins made so far, ``view`` the
    view the jobs were planned from; records get negative ids, apart from the ids a replay
    gives the checkpoints ``assemble`` proposes."""

    view: View
    bases: Bases
    config: BaseModel | None
    counter: TokenCounter
    summarizer: Summarizer | None = None
    numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1_000_001))
    # The summaries the live run stored, by what they stand for: a rehearsed job the live run
    # made too is answered with the stored row (its id, its text), so a replay of a live
    # session sends what the live turns sent, byte for byte.
    stored: Mapping[tuple[object, ...], SummaryRecord] = field(default_factory=dict)

    @property
    def session(self) -> str:
        return self.view.session or ""

    def number(self) -> int:
        return next(self.numbers)

    def recorded(self, *key: object) -> SummaryRecord | None:
        """The live run's summary for ``key`` (``("leaf", first_seq, last_seq)`` or
        ``("condensed", children)``), if it stored one."""
        return self.stored.get(key)


def summary_key(record: SummaryRecord) -> tuple[object, ...]:
    """What a stored summary stands for, as :meth:`Rehearsal.recorded` looks it up."""
    if record.kind == "leaf":
        return ("leaf", record.first_seq, record.last_seq)
    return ("condensed", tuple(record.children))


@dataclass(frozen=True, slots=True)
class JobHandler:
    """How one job type runs; see the module docstring."""

    job: type[Job]
    run: Callable[[JobRun, Any], object | None]
    rehearse: Callable[[Rehearsal, Any], object | None] | None = None
    lease: bool = False

    @property
    def kind(self) -> str:
        """The job type's name (what ``comal plugins`` lists)."""
        return self.job.__name__


def handler_table() -> Mapping[type[Job], JobHandler]:
    """Every handler the enabled plugins register, by job type (comal's own engines' come from
    its built-in plugin): read from the plugin seam, so a plugin enabled later is seen."""
    from ..plugins import job_handlers, memo

    def build() -> Mapping[type[Job], JobHandler]:
        table: dict[type[Job], JobHandler] = {}
        for handler in job_handlers():
            if handler.job in table and table[handler.job] is not handler:
                raise JobFailed(
                    f"two handlers for {handler.job.__name__} jobs: a job type is run by one "
                    "handler; remove one of the plugins that register it"
                )
            table[handler.job] = handler
        return MappingProxyType(table)

    # Built once per set of enabled plugins, not on every job looked up.
    found: Mapping[type[Job], JobHandler] = memo("job_handler_table", build)
    return found


def handler_for(job: Job) -> JobHandler:
    """The handler of ``job``'s type, or :class:`JobFailed` naming the kind."""
    found = handler_table().get(type(job))
    if found is None:
        raise JobFailed(
            f"no executor for {job.kind} jobs in this comal: the engine that plans them must "
            "register a handler (comal_job_handlers) through its plugin"
        )
    return found
