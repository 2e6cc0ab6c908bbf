"""Replaying a recorded session as an agent would have experienced it, under any engine.

Pure functions of ledger entries: the caller reads the entries and nothing is written back. At
each model call of the original run (each assistant entry), the engine first gets the
maintenance it plans for the session as it stood (executed in memory by the caller's
``execute``, as an agent with inline compaction would at the end of the previous turn), then
assembles the active memory from the entries before the call and the stand-ins this replay made
so far (checkpoints and summaries, held in memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ..errors import BudgetError, UserError
from ..ledger import CheckpointRecord, Entry, SummaryRecord
from ..messages import Message, Role, canonical_json, load_json, message_to_json, sha256_hex
from ..tokens import REPLY_PRIMING, Budget, TokenCounter
from ._assembly import Action, Assembly, CheckpointProposal
from ._engine import Engine, Job, config_counter
from ._registry import get_engine
from ._render import EngineCache
from ._view import View

__all__ = [
    "Bases",
    "Execute",
    "ReplayTurn",
    "action_dict",
    "proposal_record",
    "replay",
    "split_view",
]


@dataclass(frozen=True, slots=True)
class Bases:
    """The stand-ins a replay holds in memory: the latest checkpoint and the summary frontier."""

    checkpoint: CheckpointRecord | None = None
    summaries: tuple[SummaryRecord, ...] = ()


# Runs planned jobs against the view they were planned from; returns the new stand-ins and
# the records it made (for the turn's report). Supplied one layer up (it may summarize).
Execute = Callable[[Sequence[Job], View, Bases], tuple[Bases, tuple[object, ...]]]


@dataclass(frozen=True, slots=True)
class ReplayTurn:
    """One model call of the original run, as the engine would have sent it."""

    turn: int
    seq: int  # the assistant entry this request produced
    full_tokens: int  # the whole history before it, priced as sent (an unmanaged agent)
    input_tokens: int  # what the engine sends (0 when it raised)
    fits: bool
    actions: tuple[Action, ...]
    assembly: Assembly | None
    error: str | None = None
    checkpoint: CheckpointRecord | None = field(default=None, compare=False)
    # What the assembly was given, so a caller can assemble again and compare.
    view: View | None = field(default=None, compare=False)
    state: object = field(default=None, compare=False)
    # Records the planned maintenance made before this call (summaries, checkpoints).
    made: tuple[object, ...] = field(default=(), compare=False)


def split_view(entries: Sequence[Entry], session: str, checkpoint: CheckpointRecord | None) -> View:
    """The limit engine's view over ``entries`` behind ``checkpoint`` (see
    :meth:`View.from_entries`)."""
    return View.from_entries(entries, session, checkpoint=checkpoint)


def proposal_record(
    session: str, proposal: CheckpointProposal, number: int, counter: TokenCounter
) -> CheckpointRecord:
    """An in-memory checkpoint record for a proposal (replays never write to the ledger)."""
    body = message_to_json(proposal.message)
    return CheckpointRecord(
        id=-number,
        session=session,
        first_seq=proposal.first_seq,
        last_seq=proposal.last_seq,
        tokens=proposal.tokens,
        digest=sha256_hex(body),
        created_at=datetime.fromtimestamp(0, UTC).isoformat(),
        message=proposal.message,
        meta=dict(proposal.meta),
    )


def _view(
    entries: Sequence[Entry],
    session: str,
    bases: Bases,
    engine: Engine,
    system: Sequence[Message],
) -> View:
    return View.from_entries(
        entries,
        session,
        checkpoint=bases.checkpoint if "checkpoint" in engine.bases else None,
        summaries=bases.summaries if "summaries" in engine.bases else (),
        system=system,
    )


def replay(
    entries: Sequence[Entry],
    session: str,
    budget: Budget,
    config: BaseModel | None = None,
    *,
    engine: Engine | str = "limit",
    execute: Execute | None = None,
    cache: EngineCache | None = None,
    system: Sequence[Message] = (),
) -> Iterator[ReplayTurn]:
    """Assemble before every assistant entry; yields one :class:`ReplayTurn` per model call.

    ``system`` is the instructions the agent sends (its system prompt), placed first in every
    assembly as the agent's own views do, so a replay with the agent's settings reproduces its
    requests byte for byte.

    ``execute`` runs the jobs the engine plans (required for an engine that plans any). A coded
    error (CONTEXT_PRESSURE_LOOP, CONTEXT_OVERHEAD) ends that turn with ``error`` set and
    nothing sent; the replay goes on, as a user who raised the window would.
    """
    engine = get_engine(engine) if isinstance(engine, str) else engine
    config = config if config is not None else engine.config_type()
    cache = cache if cache is not None else EngineCache()
    counter = config_counter(config)
    bases = Bases()
    state: object = None
    full = 0
    turn = 0
    made_checkpoints = 0
    for i, entry in enumerate(entries):
        if entry.role == Role.ASSISTANT.value and i > 0:
            turn += 1
            prefix = entries[:i]
            view = _view(prefix, session, bases, engine, system)
            jobs = engine.plan(view, budget, config, cache=cache)
            made: tuple[object, ...] = ()
            if jobs:
                if execute is None:
                    raise UserError(
                        f"engine {engine.name!r} planned {len(jobs)} maintenance job(s) and "
                        "this replay has no executor for them"
                    )
                bases, made = execute(jobs, view, bases)
                view = _view(prefix, session, bases, engine, system)
            unmanaged = budget.fixed + full + REPLY_PRIMING
            given = state
            try:
                assembly = engine.assemble(view, budget, config, state=given, cache=cache)
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
                        session, assembly.checkpoint_to_store, made_checkpoints, counter
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


def action_dict(action: Action) -> dict[str, Any]:
    """An action as a JSON-able dict with its kind, for ``--json`` output."""
    out: dict[str, Any] = {"kind": type(action).__name__.lower()}
    for name in getattr(action, "__dataclass_fields__", {}):
        value = getattr(action, name)
        if isinstance(value, Message):
            continue
        if hasattr(value, "__dataclass_fields__"):
            value = {k: getattr(value, k) for k in value.__dataclass_fields__}
        out[name] = value
    # Round-trip through canonical JSON so tuples and nested values print as JSON does.
    result: dict[str, Any] = load_json(canonical_json(out))
    return result
