"""Replaying a recorded session as an agent would have experienced it, under any engine.

Nothing is written: the caller reads the entries, and the stand-ins the replay makes
(checkpoints, summaries) live in memory. At each model call of the original run (each assistant
entry) the turn is the agent's: first the maintenance the engine plans for the session as it
stood, run in memory through the executor table (as an agent with inline compaction would at
the end of the previous turn; jobs that run under a lease are planned again pass after pass, as
a sweep does), then the assembly from the entries before the call and the stand-ins made so
far. Engine calls go through :class:`MemoryTurns`, the in-memory side of the turn service.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from pydantic import BaseModel

from ..compaction import Rehearsal, SweepLimits, handler_for, rehearse
from ..context import (
    Assembly,
    Bases,
    Engine,
    EngineCache,
    Job,
    ReplayTurn,
    Summarizer,
    View,
    config_counter,
    get_engine,
    proposal_record,
)
from ..errors import BudgetError
from ..ledger import Entry
from ..messages import Message, Role
from ..tokens import REPLY_PRIMING, Budget

__all__ = ["MemoryTurns", "replay"]


class MemoryTurns:
    """The turn service over entries in memory (nothing written): the same plan → run →
    assemble a live turn makes, with the stand-ins held by the caller as :class:`Bases`."""

    def __init__(
        self,
        engine: Engine,
        config: BaseModel,
        *,
        session: str,
        cache: EngineCache | None = None,
        summarizer: Summarizer | None = None,
        system: Sequence[Message] = (),
    ) -> None:
        self.engine, self.config = engine, config
        self.cache = cache if cache is not None else EngineCache()
        self.summarizer, self.system, self.session = summarizer, tuple(system), session
        self.counter = config_counter(config)
        self.limits = SweepLimits.of(config)
        # Apart from the ids a replay gives the checkpoints ``assemble`` proposes.
        self.numbers: Iterator[int] = itertools.count(1_000_001)

    def view(self, entries: Sequence[Entry], bases: Bases) -> View:
        return View.from_entries(
            entries,
            self.session,
            checkpoint=bases.checkpoint if "checkpoint" in self.engine.bases else None,
            summaries=bases.summaries if "summaries" in self.engine.bases else (),
            system=self.system,
        )

    def plan(self, view: View, budget: Budget) -> tuple[Job, ...]:
        return self.engine.plan(view, budget, self.config, cache=self.cache)

    def assemble(self, view: View, budget: Budget, state: object = None) -> Assembly:
        return self.engine.assemble(view, budget, self.config, state=state, cache=self.cache)

    def maintain(
        self, entries: Sequence[Entry], bases: Bases, budget: Budget
    ) -> tuple[Bases, tuple[object, ...]]:
        """The planned maintenance, run in memory; leased jobs pass after pass as a sweep."""
        made: list[object] = []
        for _ in range(self.limits.max_passes):
            view = self.view(entries, bases)
            jobs = self.plan(view, budget)
            if not any(j.actionable for j in jobs):
                break
            r = Rehearsal(view, bases, self.config, self.counter, self.summarizer, self.numbers)
            done = rehearse(r, jobs)
            bases = r.bases
            made += done
            if not done or not any(handler_for(j).lease for j in jobs):
                break
        return bases, tuple(made)


def replay(
    entries: Sequence[Entry],
    session: str,
    budget: Budget,
    config: BaseModel | None = None,
    *,
    engine: Engine | str = "limit",
    summarizer: Summarizer | None = None,
    cache: EngineCache | None = None,
    system: Sequence[Message] = (),
) -> Iterator[ReplayTurn]:
    """Assemble before every assistant entry; yields one :class:`ReplayTurn` per model call.

    ``system`` is the instructions the agent sends (its system prompt), placed first in every
    assembly as the agent's own views do, so a replay with the agent's settings reproduces its
    requests byte for byte. ``summarizer`` makes the summaries of the summarizing engines (their
    offline default when ``None``).

    A coded error (CONTEXT_PRESSURE_LOOP, CONTEXT_OVERHEAD) ends that turn with ``error`` set and
    nothing sent; the replay goes on, as a user who raised the window would.
    """
    engine = get_engine(engine) if isinstance(engine, str) else engine
    config = config if config is not None else engine.config_type()
    turns = MemoryTurns(
        engine, config, session=session, cache=cache, summarizer=summarizer, system=system
    )
    bases = Bases()
    state: object = None
    full = 0
    turn = 0
    made_checkpoints = 0
    for i, entry in enumerate(entries):
        if entry.role == Role.ASSISTANT.value and i > 0:
            turn += 1
            prefix = entries[:i]
            bases, made = turns.maintain(prefix, bases, budget)
            view = turns.view(prefix, bases)
            unmanaged = budget.fixed + full + REPLY_PRIMING
            given = state
            try:
                assembly = turns.assemble(view, budget, given)
            except BudgetError as exc:
                state = None
                yield ReplayTurn(
                    turn, entry.seq, unmanaged, 0, False, (), None, exc.code, None, view, given,
                    made,
                )  # fmt: skip
            else:
                state = assembly.next_state
                made_record = None
                if assembly.checkpoint_to_store is not None:
                    made_checkpoints += 1
                    made_record = proposal_record(
                        session, assembly.checkpoint_to_store, made_checkpoints, turns.counter
                    )
                    bases = Bases(made_record, bases.summaries)
                sent = budget.fixed + assembly.history_tokens
                yield ReplayTurn(
                    turn,
                    entry.seq,
                    unmanaged,
                    sent,
                    sent <= budget.input_limit,
                    assembly.actions,
                    assembly,
                    None,
                    made_record,
                    view,
                    given,
                    made,
                )
        full += entry.tokens
