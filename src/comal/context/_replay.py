"""Replaying a recorded session as an agent would have experienced it, and the LIM-7 views.

Pure functions of ledger entries: the caller reads the entries (and writes nothing back). At each
model call of the original run (each assistant entry), the engine assembles the active memory
from the entries before it and the checkpoints this replay derived so far, held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from ..errors import BudgetError
from ..ledger import CheckpointRecord, Entry
from ..messages import Message, Role, canonical_json, load_json, message_to_json, sha256_hex
from ..tokens import REPLY_PRIMING, Budget, TokenCounter
from ._assembly import Action, Assembly, CheckpointProposal, EngineState
from ._checkpoint import _fit, derive_checkpoint, previous_state
from ._config import EngineConfig, Limits
from ._limit import assemble
from ._view import View
from ._workstate import WorkState

__all__ = [
    "ReplayTurn",
    "action_dict",
    "compact",
    "proposal_record",
    "render_state",
    "replay",
    "split_view",
    "work_state",
]

_PINNED = (Role.SYSTEM.value, Role.DEVELOPER.value)


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
    state: EngineState | None = field(default=None, compare=False)


def split_view(entries: Sequence[Entry], session: str, checkpoint: CheckpointRecord | None) -> View:
    """The view over ``entries`` (a prefix of a session) after ``checkpoint``, as
    :meth:`View.from_ledger` would read it: leading system entries pinned, and entries from the
    first whole step after the checkpoint."""
    lead = 0
    while lead < len(entries) and entries[lead].role in _PINNED:
        lead += 1
    start = entries[lead - 1].seq + 1 if lead else 0
    if checkpoint is not None:
        start = max(start, checkpoint.last_seq + 1)
        nxt = next((e for e in entries if e.seq >= start), None)
        if nxt is not None and nxt.step < start:
            start = nxt.step
    rest = tuple(e for e in entries[lead:] if e.seq >= start)
    return View(rest, checkpoint, session, (), tuple(entries[:lead]))


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


def replay(
    entries: Sequence[Entry],
    session: str,
    budget: Budget,
    config: EngineConfig | None = None,
) -> Iterator[ReplayTurn]:
    """Assemble before every assistant entry; yields one :class:`ReplayTurn` per model call.

    A coded error (CONTEXT_PRESSURE_LOOP, CONTEXT_OVERHEAD) ends that turn with ``error`` set
    and nothing sent; the replay goes on, as a user who raised the window would.
    """
    config = config if config is not None else EngineConfig()
    counter = config.token_counter
    checkpoint: CheckpointRecord | None = None
    state: EngineState | None = None
    full = 0
    turn = 0
    made = 0
    for i, entry in enumerate(entries):
        if entry.role == Role.ASSISTANT.value and i > 0:
            turn += 1
            view = split_view(entries[:i], session, checkpoint)
            unmanaged = budget.fixed + full + REPLY_PRIMING
            given = state
            try:
                assembly = assemble(view, budget, config, state=given)
            except BudgetError as exc:
                state = None
                yield ReplayTurn(
                    turn, entry.seq, unmanaged, 0, False, (), None, exc.code, None, view, given
                )
            else:
                state = assembly.next_state
                made_record = None
                if assembly.checkpoint_to_store is not None:
                    made += 1
                    made_record = proposal_record(
                        session, assembly.checkpoint_to_store, made, counter
                    )
                    checkpoint = made_record
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
                )
        full += entry.tokens


def work_state(view: View, config: EngineConfig | None = None) -> WorkState:
    """``/state``: the work state a checkpoint derived now would carry (LIM-3, LIM-7)."""
    config = config if config is not None else EngineConfig()
    state = previous_state(view.checkpoint)
    for group in _groups(view.entries):
        state.fold(list(group), config)
    return state


def render_state(state: WorkState, counter: TokenCounter) -> str:
    """The text a checkpoint of ``state`` would carry, untrimmed."""
    message, _ = _fit(state, counter, max_tokens=10**9)
    return message.text


def compact(
    view: View, budget: Budget, config: EngineConfig | None = None
) -> CheckpointProposal | None:
    """``/compact``: derive a checkpoint now, without an LLM, covering every whole step before
    the protected tail (the newest step and the K newest tool results). None: nothing to cover.
    """
    config = config if config is not None else EngineConfig()
    groups = _groups(view.entries)
    results = [i for i, g in enumerate(groups) for e in g if e.message.tool_result is not None]
    keep = config.keep_recent_results
    protected = len(groups) - 1
    if len(results) >= keep and keep > 0:
        protected = min(protected, results[-keep])
    if protected <= 0:
        return None
    limits = Limits.of(budget, config)
    return derive_checkpoint(
        view.checkpoint,
        groups[:protected],
        config,
        config.token_counter,
        limits.checkpoint_reserve,
        {"requested": "compact"},
    )


def _groups(entries: Sequence[Entry]) -> list[list[Entry]]:
    starts = [i for i, e in enumerate(entries) if i == 0 or e.step != entries[i - 1].step]
    return [list(entries[s:e]) for s, e in pairwise([*starts, len(entries)])]


def action_dict(action: Action) -> dict[str, Any]:
    """An action as a JSON-able dict with its kind, for ``--json`` output."""
    out: dict[str, Any] = {"kind": type(action).__name__.lower()}
    for name in action.__dataclass_fields__:
        value = getattr(action, name)
        if isinstance(value, Message):
            continue
        if hasattr(value, "__dataclass_fields__"):
            value = {k: getattr(value, k) for k in value.__dataclass_fields__}
        out[name] = value
    # Round-trip through canonical JSON so tuples and nested values print as JSON does.
    result: dict[str, Any] = load_json(canonical_json(out))
    return result
