"""The turn service's in-memory store: a recorded session's entries, and the stand-ins a replay
makes, held by the caller instead of written.

:class:`ContextSession <comal.turns.ContextSession>` runs over a ledger or over a
:class:`MemoryStore`; the turn is the same :meth:`~comal.turns.ContextSession.prepare` either
way (maintenance, view, assembly, commit, the record's fields). Only the store's own parts
differ: the view is read from the entries given so far (:meth:`MemoryStore.advance`) and the
stand-ins held here (:class:`~comal.context.Bases`); a checkpoint an assembly proposes is kept
as a record with a replay's id; maintenance runs the executor table's ``rehearse`` side, pass
after pass for jobs that would run under the lease, as a sweep does; nothing is written.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence

from pydantic import BaseModel

from ..compaction import Rehearsal, SweepLimits, handler_for, rehearse, summary_key
from ..context import Assembly, Bases, Job, Summarizer, View, config_counter, proposal_record
from ..ledger import CheckpointRecord, Entry, SummaryRecord
from ..messages import Message
from ..tokens import TokenCounter

__all__ = ["MemoryStore"]


class MemoryStore:
    """A session's entries in memory, given turn by turn (see the module docstring)."""

    def __init__(
        self,
        entries: Sequence[Entry],
        session: str,
        config: BaseModel,
        stored: Sequence[SummaryRecord] = (),
    ) -> None:
        self.all = tuple(entries)
        # The summaries a live run of this session stored: jobs it made too are answered
        # with them (:meth:`comal.compaction.Rehearsal.recorded`).
        self.stored = {summary_key(s): s for s in stored}
        self.session = session
        self.counter: TokenCounter = config_counter(config)
        self.bases = Bases()
        self.upto = 0
        self.made: tuple[object, ...] = ()  # what maintenance made for the current turn
        # Of the current turn's time, what a live turn runs off its path (deferred summaries).
        self.background_ms = 0.0
        self.last_sent = -1  # the last seq the previous request carried
        self.limits = SweepLimits.of(config)
        self._checkpoints = 0
        # Apart from the ids a replay gives the checkpoints ``assemble`` proposes.
        self.numbers: Iterator[int] = itertools.count(1_000_001)

    def advance(self, upto: int) -> None:
        """The session as it stood before entry ``upto`` (its index in the entries)."""
        self.upto = upto
        self.made = ()
        self.background_ms = 0.0

    @property
    def entries(self) -> Sequence[Entry]:
        return self.all[: self.upto]

    def view(self, system: Sequence[Message], bases: frozenset[str]) -> View:
        return View.from_entries(
            self.entries,
            self.session,
            checkpoint=self.bases.checkpoint if "checkpoint" in bases else None,
            summaries=self.bases.summaries if "summaries" in bases else (),
            system=tuple(system),
        )

    def commit(self, assembly: Assembly, at: int) -> CheckpointRecord | None:
        """The proposed checkpoint, kept as the replay's stand-in; the request is noted as
        sent (its last seq is what the next one's events are new after)."""
        self.last_sent = at - 1
        proposal = assembly.checkpoint_to_store
        if proposal is None:
            return None
        self._checkpoints += 1
        record = proposal_record(self.session, proposal, self._checkpoints, self.counter)
        self.bases = Bases(record, self.bases.summaries)
        return record

    def session_tokens(self) -> int:
        return sum(e.tokens for e in self.entries)

    def maintain(
        self,
        plan: Callable[[View, bool], tuple[Job, ...]],
        view_of: Callable[[], View],
        config: BaseModel | None,
        summarizer: Summarizer | None,
        *,
        force: bool = False,
        deferred: bool = False,
    ) -> tuple[object, ...]:
        """The planned maintenance run in memory; jobs that would run under the lease pass
        after pass, as a sweep does (bounded by the engine's sweep limits).

        ``deferred``: a live turn would run the leased jobs on a background thread (the
        engine's ``defer_compaction``): the time from the first job on is kept apart in
        :attr:`background_ms`, so a replay's timing of the turn is what a live turn pays
        (the first plan, not the summaries)."""
        made: list[object] = []
        started: float | None = None
        for n in range(self.limits.max_passes):
            view = view_of()
            jobs = plan(view, force)
            if not any(j.actionable for j in jobs):
                break
            if n == 0 and deferred and any(handler_for(j).lease for j in jobs):
                started = time.perf_counter()
            r = Rehearsal(
                view, self.bases, config, self.counter, summarizer, self.numbers, self.stored
            )
            done = rehearse(r, jobs)
            self.bases = r.bases
            made += done
            if not done or not any(handler_for(j).lease for j in jobs):
                break
        if started is not None:
            self.background_ms += (time.perf_counter() - started) * 1000
        self.made += tuple(made)
        return tuple(made)
