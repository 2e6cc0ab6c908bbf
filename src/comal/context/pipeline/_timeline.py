"""When each edit of the pipeline happens, derived from the entries alone (no stored state).

The layers edit the *tail* (the entries after the head and the summary). Every decision is a
function of the tail's entries, so a resumed process with no memory decides exactly what the
live one did, and assembling twice gives the same bytes.

Points
    A *point* is a moment the engine assembled: before each assistant entry of the tail (the
    model call that produced it) and now, at the end. Point ``p`` sees the entries ``[:p]``.

Ages
    Age-based edits (thinking beyond ``thinkingKeepTurns`` model turns, errors older than
    ``evictionMinAge`` turns, results beyond the last ``observationKeepWindow`` uses) are
    monotone: once due, due forever. Each gets the first point at which it is due, rounded up
    to an *epoch* point (every ``editStrideTurns`` model turns), so edits land in batches.

The cache fence
    At point ``p`` the fence is the oldest position an age-based edit may still change: the
    oldest reasoning block, error and result whose edit has not landed yet. Everything before
    it is final until an announced rebase (a summary, a window slide, masking switching on or
    off, an emergency cut). Reactive edits (a file read again supersedes the earlier read) may
    only change entries at or above the fence of the assembly before the one that first saw
    the superseding result; an earlier read below that fence stays as it was. So nothing below
    the fence of one assembly changes in the next (PIP-2).

Masking (layer 5) switches on when the history passes ``observationTriggerChars`` and off
only below ``observationDeactivationChars``; characters are counted before any masking, so
masking cannot switch itself off.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Aging", "Timeline", "masking_periods"]


@dataclass(frozen=True, slots=True)
class Timeline:
    """Points of one tail. ``assistants``: tail indices of its assistant entries."""

    n: int
    assistants: tuple[int, ...]
    stride: int

    @property
    def points(self) -> tuple[int, ...]:
        return (*self.assistants, self.n)

    def turns_before(self, p: int) -> int:
        """Model turns present at point ``p`` (assistant entries before it)."""
        return bisect_left(self.assistants, p)

    def next_point(self, index: int) -> int:
        """The first point that sees the entry at ``index``."""
        j = bisect_right(self.assistants, index)
        return self.assistants[j] if j < len(self.assistants) else self.n

    def prev_point(self, p: int) -> int | None:
        """The point before ``p`` (None when ``p`` is the first)."""
        j = bisect_left(self.assistants, p)
        return self.assistants[j - 1] if j > 0 else None

    def point_with_turns(self, m: int) -> int | None:
        """The first point with at least ``m`` model turns before it, if it exists yet."""
        if m < len(self.assistants):
            return self.assistants[max(m, 0)]
        return self.n if m == len(self.assistants) else None

    def epoch(self, p: int | None) -> int | None:
        """The first epoch point at or after ``p`` (None when not reached yet)."""
        if p is None:
            return None
        turns = self.turns_before(p)
        m = -(-turns // self.stride) * self.stride
        return self.point_with_turns(m)


@dataclass(frozen=True, slots=True)
class Aging:
    """An age-based rule over ``items`` (tail indices, oldest first): ``due[r]`` is the point
    at which item ``r``'s edit lands (None: not yet). ``due`` never decreases with ``r``."""

    items: tuple[int, ...]
    due: tuple[int | None, ...]

    @classmethod
    def by_count(cls, timeline: Timeline, items: Sequence[int], keep: int) -> Aging:
        """Item ``r`` is due once ``keep`` newer items exist (beyond the last ``keep``)."""
        due: list[int | None] = []
        for r in range(len(items)):
            newer = r + keep
            natural = timeline.next_point(items[newer]) if newer < len(items) else None
            due.append(timeline.epoch(natural))
        return cls(tuple(items), tuple(due))

    @classmethod
    def by_turns(cls, timeline: Timeline, items: Sequence[int], keep: int) -> Aging:
        """Item at index ``i`` is due once more than ``keep`` model turns came after it."""
        due = [
            timeline.epoch(timeline.point_with_turns(timeline.turns_before(i + 1) + keep))
            for i in items
        ]
        return cls(tuple(items), tuple(due))

    def due_at(self, rank: int) -> int | None:
        return self.due[rank]

    def oldest_pending(self, p: int, start: int) -> tuple[int, int]:
        """(rank, position) of the oldest item present at ``p`` whose edit has not landed at
        ``p``, scanning from rank ``start``; position is ``p`` itself when there is none.
        Returns the rank to resume from at a later point (``due`` never decreases)."""
        r = start
        while r < len(self.items) and self.due[r] is not None and self.due[r] <= p:  # type: ignore[operator]
            r += 1
        if r < len(self.items) and self.items[r] < p:
            return r, self.items[r]
        return r, p


def masking_periods(
    chars: Sequence[tuple[int, int]], trigger: int, deactivation: int
) -> dict[int, int | None]:
    """For each ``(point, history characters)`` in order, the point the current masking period
    started at (None: masking off). On above ``trigger``, off only below ``deactivation``: the
    gap between them keeps masking from flapping."""
    out: dict[int, int | None] = {}
    since: int | None = None
    for p, n in chars:
        if since is None and n > trigger:
            since = p
        elif since is not None and n < deactivation:
            since = None
        out[p] = since
    return out
