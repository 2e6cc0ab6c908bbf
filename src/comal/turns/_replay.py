"""Replaying a recorded session as an agent would have experienced it, under any engine.

Nothing is written: the replay is the turn service (:class:`~comal.turns.ContextSession`) over
the session's entries in memory (:class:`~comal.turns.MemoryStore`), and at each model call of
the original run (each assistant entry) it takes the same turn a live agent takes —
:meth:`~comal.turns.ContextSession.prepare`: the maintenance the engine plans for the session
as it stood (run in memory through the executor table; jobs that run under a lease are planned
again pass after pass, as a sweep does), the view of the entries before the call and the
stand-ins made so far, the assembly, and its commit (a proposed checkpoint kept in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from pydantic import BaseModel

from ..context import Engine, EngineCache, ReplayTurn, Summarizer, get_engine
from ..errors import BudgetError
from ..ledger import Entry, Scope, SummaryRecord
from ..messages import Message, Role
from ..tokens import REPLY_PRIMING, Budget
from ._memory import MemoryStore
from ._service import ContextSession

__all__ = ["replay"]


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
    system_at: Callable[[int], tuple[Sequence[Message], Budget]] | None = None,
    stored: Sequence[SummaryRecord] = (),
) -> Iterator[ReplayTurn]:
    """Assemble before every assistant entry; yields one :class:`ReplayTurn` per model call.

    ``system`` is the instructions the agent sends (its system prompt), placed first in every
    assembly as the agent's own views do, so a replay with the agent's settings reproduces its
    requests byte for byte; ``system_at(seq)``, when given, is the system prompt and budget of
    the model call that wrote entry ``seq`` (a session whose instruction files changed sent
    another system prompt from then on, DRV-1). ``summarizer`` makes the summaries of the
    summarizing engines (their offline default when ``None``); ``stored`` are the summaries a live
    run of the session stored: a summary the replay plans that the live run made too is that
    stored one (its id and text, what the live turns sent).

    A coded error (CONTEXT_PRESSURE_LOOP, CONTEXT_OVERHEAD) ends that turn with ``error`` set and
    nothing sent; the replay goes on, as a user who raised the window would.
    """
    engine = get_engine(engine) if isinstance(engine, str) else engine
    config = config if config is not None else engine.config_type()
    store = MemoryStore(entries, session, config, stored)
    service = ContextSession(
        store,
        Scope("replay", "replay", session or "replay"),
        engine,
        config,
        system=system,
        summarizer=lambda: summarizer,
        cache=cache,
    )
    state: object = None
    full = 0
    turn = 0
    for i, entry in enumerate(entries):
        if entry.role == Role.ASSISTANT.value and i > 0:
            turn += 1
            store.advance(i)
            if system_at is not None:
                given_system, budget = system_at(entry.seq)
                service.system = tuple(given_system)
            unmanaged = budget.fixed + full + REPLY_PRIMING
            given = state
            try:
                prepared = service.prepare(budget, state=given)
            except BudgetError as exc:
                state = None
                view = service.view()
                yield ReplayTurn(
                    turn, entry.seq, unmanaged, 0, False, (), None, exc.code, None, view, given,
                    store.made, store.background_ms,
                )  # fmt: skip
            else:
                assembly = prepared.assembly
                state = assembly.next_state
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
                    prepared.stored,
                    prepared.view,
                    given,
                    prepared.maintained,
                    store.background_ms,
                )
        full += entry.tokens
