"""The values of a replay (a recorded session assembled again, under any engine).

The replay itself is a turn like any other and lives with the turn service
(:func:`comal.turns.replay`); here are the values it yields and holds: :class:`ReplayTurn`, the
in-memory stand-ins (:class:`Bases`) and the checkpoint record of a proposal never stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..ledger import CheckpointRecord, Entry, SummaryRecord
from ..messages import Message, canonical_json, load_json, message_to_json, sha256_hex
from ..tokens import TokenCounter
from ._assembly import Action, Assembly, CheckpointProposal
from ._view import View

__all__ = ["Bases", "ReplayTurn", "action_dict", "proposal_record", "split_view"]


@dataclass(frozen=True, slots=True)
class Bases:
    """The stand-ins a replay holds in memory: the latest checkpoint and the summary frontier."""

    checkpoint: CheckpointRecord | None = None
    summaries: tuple[SummaryRecord, ...] = ()


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
    # Milliseconds of this call's maintenance a live turn runs off its path (deferred
    # summaries on the background thread): not what the turn pays.
    background_ms: float = field(default=0.0, compare=False)


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
        # As the ledger stores it (canonical JSON: keys sorted), so nothing the next assembly
        # derives from it can differ between a replay and the live run.
        meta=load_json(canonical_json(dict(proposal.meta))),
    )


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
