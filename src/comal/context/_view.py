"""The engine's input: an immutable snapshot of one session, and the engine's only I/O helpers.

:meth:`View.from_ledger` reads the latest checkpoint and the entries after it (plus the session's
leading system entries, which no checkpoint may cover); :func:`store_checkpoint` persists what an
assembly proposes. Everything between is pure: :func:`~comal.context.assemble` reads only the
view, the budget and the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..errors import UserError
from ..ledger import CheckpointRecord, Entry, LedgerBackend, Scope
from ..messages import Message, Role
from ._assembly import CheckpointProposal

__all__ = ["View", "store_checkpoint"]

_PINNED_ROLES = (Role.SYSTEM.value, Role.DEVELOPER.value)
_HEAD_BATCH = 8


@dataclass(frozen=True, slots=True)
class View:
    """What the engine may see this turn.

    ``entries`` are the stored entries after ``checkpoint`` in seq order (from the start of the
    step the checkpoint ended in, if it ended inside one), each with its stored token count;
    ``pinned`` are the session's leading system/developer entries, always sent; ``system`` is
    the caller's instructions, priced by ``Budget.system_tokens`` (not by the engine).
    ``session`` is the session id the entries belong to.
    """

    entries: tuple[Entry, ...]
    checkpoint: CheckpointRecord | None = None
    session: str | None = None
    system: tuple[Message, ...] = ()
    pinned: tuple[Entry, ...] = ()

    def __post_init__(self) -> None:
        for name in ("entries", "system", "pinned"):
            value: Sequence[Any] = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        seqs = [e.seq for e in (*self.pinned, *self.entries)]
        if any(b <= a for a, b in pairwise(seqs)):
            raise UserError("a View's pinned entries and entries must be in strictly rising seq")

    @property
    def end_seq(self) -> int:
        """The seq after the newest entry the view knows of (the session depth so far)."""
        last = [e.seq for e in (*self.pinned, *self.entries)]
        if self.checkpoint is not None:
            last.append(self.checkpoint.last_seq)
        return max(last, default=-1) + 1

    @classmethod
    def from_ledger(
        cls, ledger: LedgerBackend, scope: Scope, *, system: Sequence[Message] = ()
    ) -> View:
        """The latest checkpoint, the entries after it, and the leading system entries.

        Entries are read from the first whole step after the checkpoint: a checkpoint written
        by another engine that ends inside a step would otherwise leave tool results without
        their calls (LIM-4); that step is sent whole instead.
        """
        pinned: list[Entry] = []
        seq = 0
        while True:
            batch = ledger.entries(scope, start_seq=seq, end_seq=seq + _HEAD_BATCH - 1)
            lead = 0
            while lead < len(batch) and batch[lead].role in _PINNED_ROLES:
                lead += 1
            pinned += batch[:lead]
            if lead < _HEAD_BATCH:
                break
            seq += _HEAD_BATCH
        checkpoint = ledger.latest_checkpoint(scope)
        start = pinned[-1].seq + 1 if pinned else 0
        if checkpoint is not None:
            start = max(start, checkpoint.last_seq + 1)
            first = ledger.entries(scope, start_seq=start, end_seq=start)
            if first and first[0].step < start:
                start = first[0].step
        entries = tuple(ledger.entries(scope, start_seq=start))
        return cls(entries, checkpoint, scope.session, tuple(system), tuple(pinned))


def store_checkpoint(
    ledger: LedgerBackend, scope: Scope, proposal: CheckpointProposal
) -> CheckpointRecord:
    """Persist an assembly's proposed checkpoint (one ledger transaction)."""
    return ledger.add_checkpoint(
        scope,
        proposal.message,
        first_seq=proposal.first_seq,
        last_seq=proposal.last_seq,
        meta=dict(proposal.meta),
    )
