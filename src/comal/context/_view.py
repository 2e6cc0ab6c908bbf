"""The engine's input: an immutable snapshot of one session, and the engine's only I/O helpers.

A view is the session's leading system entries (``pinned``, which nothing may cover), the
stand-ins an engine reads in front of the history (its ``bases``: the latest checkpoint, the
frontier of summaries), and every entry after what they cover. A checkpoint whose meta says
``keeps_head`` stands for a middle only (middle-out, PIP-4): the entries between the pinned
ones and its ``first_seq`` are read back in front of it as the view's ``head``.
:meth:`View.from_ledger` reads one from the ledger and :meth:`View.from_entries` builds the
same one from entries in memory (a replay), by one rule; :func:`store_checkpoint` persists
what an assembly proposes. Everything between is pure: an engine's ``assemble`` reads only the
view, the budget and the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..errors import UserError
from ..ledger import CheckpointRecord, Entry, LedgerBackend, Scope, SummaryRecord
from ..messages import Message, Role
from ._assembly import CheckpointProposal

__all__ = ["View", "store_checkpoint"]

# Which stand-ins a view reads: the latest checkpoint (limit) and the summary frontier (dag).
# (Kept as strings here: the names are the ``Base`` literal of the engine seam.)
_DEFAULT_BASES: frozenset[str] = frozenset({"checkpoint"})

_PINNED_ROLES = (Role.SYSTEM.value, Role.DEVELOPER.value)
_HEAD_BATCH = 8


@dataclass(frozen=True, slots=True)
class View:
    """What the engine may see this turn.

    ``entries`` are the stored entries after ``checkpoint`` in seq order (from the start of the
    step the checkpoint ended in, if it ended inside one), each with its stored token count;
    ``pinned`` are the session's leading system/developer entries, always sent; ``system`` is
    the caller's instructions, priced by ``Budget.system_tokens`` (not by the engine).
    ``session`` is the session id the entries belong to. ``summaries`` is the frontier of the
    summary DAG (the summaries no other one condenses), oldest first, covering whole steps
    before ``entries``. ``head`` holds the entries before a ``keeps_head`` checkpoint's range
    (after the pinned ones), which that checkpoint does not stand for.
    ``carried`` holds the newest user message a summary covers (read from
    the frontier's ``request_seq``): an engine that must never replace the user's request by a
    summary sends it verbatim (the dag engine does).
    """

    entries: tuple[Entry, ...]
    checkpoint: CheckpointRecord | None = None
    session: str | None = None
    system: tuple[Message, ...] = ()
    pinned: tuple[Entry, ...] = ()
    summaries: tuple[SummaryRecord, ...] = ()
    head: tuple[Entry, ...] = ()
    carried: tuple[Entry, ...] = ()

    def __post_init__(self) -> None:
        for name in ("entries", "system", "pinned", "summaries", "head", "carried"):
            value: Sequence[Any] = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        seqs = [e.seq for e in (*self.pinned, *self.head, *self.entries)]
        if any(b <= a for a, b in pairwise(seqs)):
            raise UserError(
                "a View's pinned entries, head and entries must be in strictly rising seq"
            )

    @property
    def end_seq(self) -> int:
        """The seq after the newest entry the view knows of (the session depth so far)."""
        last = [e.seq for e in (*self.pinned, *self.head, *self.entries)]
        if self.checkpoint is not None:
            last.append(self.checkpoint.last_seq)
        last += [s.last_seq for s in self.summaries]
        return max(last, default=-1) + 1

    @staticmethod
    def _start(
        pinned_end: int,
        checkpoint: CheckpointRecord | None,
        summaries: Sequence[SummaryRecord],
    ) -> int:
        start = pinned_end
        if checkpoint is not None:
            start = max(start, checkpoint.last_seq + 1)
        if summaries:
            start = max(start, max(s.last_seq for s in summaries) + 1)
        return start

    @classmethod
    def from_entries(
        cls,
        entries: Sequence[Entry],
        session: str,
        *,
        checkpoint: CheckpointRecord | None = None,
        summaries: Sequence[SummaryRecord] = (),
        system: Sequence[Message] = (),
    ) -> View:
        """The view over ``entries`` (a prefix of a session, in seq order) behind the given
        stand-ins, as :meth:`from_ledger` would read it from a ledger holding them."""
        lead = 0
        while lead < len(entries) and entries[lead].role in _PINNED_ROLES:
            lead += 1
        pinned_end = entries[lead - 1].seq + 1 if lead else 0
        start = cls._start(pinned_end, checkpoint, summaries)
        if start > pinned_end:
            nxt = next((e for e in entries[lead:] if e.seq >= start), None)
            if nxt is not None and nxt.step < start:
                start = nxt.step
        rest = tuple(e for e in entries[lead:] if e.seq >= start)
        head: tuple[Entry, ...] = ()
        if _keeps_head(checkpoint):
            assert checkpoint is not None
            head = tuple(e for e in entries[lead:] if e.seq < checkpoint.first_seq)
        wanted = _request_seq(summaries)
        carried = tuple(e for e in entries if e.seq == wanted) if wanted is not None else ()
        return cls(
            rest,
            checkpoint,
            session,
            tuple(system),
            tuple(entries[:lead]),
            tuple(summaries),
            head,
            carried,
        )

    @classmethod
    def from_ledger(
        cls,
        ledger: LedgerBackend,
        scope: Scope,
        *,
        system: Sequence[Message] = (),
        bases: frozenset[str] = _DEFAULT_BASES,
    ) -> View:
        """The leading system entries, the stand-ins named by ``bases`` and the entries after
        what they cover.

        Entries are read from the first whole step after the stand-ins: a checkpoint written
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
        checkpoint = ledger.latest_checkpoint(scope) if "checkpoint" in bases else None
        summaries: Sequence[SummaryRecord] = ()
        if "summaries" in bases:
            summaries = ledger.summary_frontier(scope)
        pinned_end = pinned[-1].seq + 1 if pinned else 0
        start = cls._start(pinned_end, checkpoint, summaries)
        if start > pinned_end:
            first = ledger.entries(scope, start_seq=start, end_seq=start)
            if first and first[0].step < start:
                start = first[0].step
        entries = tuple(ledger.entries(scope, start_seq=start))
        head: tuple[Entry, ...] = ()
        if _keeps_head(checkpoint) and checkpoint is not None and checkpoint.first_seq > pinned_end:
            head = tuple(
                ledger.entries(scope, start_seq=pinned_end, end_seq=checkpoint.first_seq - 1)
            )
        wanted = _request_seq(summaries)
        carried: tuple[Entry, ...] = ()
        if wanted is not None:
            carried = tuple(ledger.entries(scope, start_seq=wanted, end_seq=wanted))
        return cls(
            entries,
            checkpoint,
            scope.session,
            tuple(system),
            tuple(pinned),
            tuple(summaries),
            head,
            carried,
        )


def _keeps_head(checkpoint: CheckpointRecord | None) -> bool:
    return checkpoint is not None and checkpoint.meta.get("keeps_head") is True


def _request_seq(summaries: Sequence[SummaryRecord]) -> int | None:
    """The seq of the newest user message the frontier covers (a summary's meta says)."""
    if not summaries:
        return None
    value = summaries[-1].meta.get("request_seq")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
