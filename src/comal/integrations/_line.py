"""Which part of a framework's history a ledger session already holds.

pydantic-ai and LangChain hand their whole history to every model call; the ledger session
that follows them holds what was recorded so far (its *line*: its entries in seq order). The
framework's history is the authority: :func:`match` says how far it agrees with the line, so
the adapter appends only what follows, and sees when the framework went another way (a message
removed, edited or dropped, another history handed in).

Messages are compared by :func:`match_key`, what a framework keeps of them through its own
conversion: the role, the text and the call ids; a tool result by its call id and text (the
house records a recall's result itself, with fields a framework's message does not carry). The
results that answer one step are compared as a set: a framework lists them in call order, the
ledger in the order the tools finished.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, canonical_json, sha256_hex

__all__ = ["Keyed", "Match", "match", "match_key"]


def match_key(message: Message) -> str:
    """What identifies ``message`` across a framework's conversion and back."""
    result = message.tool_result
    if result is not None:
        body: list[object] = ["tool", result.call_id, result.text]
    else:
        body = [message.role.value, message.text, [c.id for c in message.tool_calls]]
    return sha256_hex(canonical_json(body))


@dataclass(frozen=True, slots=True)
class Keyed:
    """One message of a line or of a framework's history, by its key."""

    key: str
    result: bool  # a tool result: compared with the other results of its step as a set


@dataclass(frozen=True, slots=True)
class Match:
    """``line``: how many entries of the line the history agrees with, from the start.
    ``pairs``: (history index, line index) of each message the line holds. ``rest``: the
    history's indexes after the agreement, in order (its new messages when the whole line
    agreed)."""

    line: int
    pairs: tuple[tuple[int, int], ...]
    rest: tuple[int, ...]


def _run(items: Sequence[Keyed], start: int) -> int:
    end = start
    while end < len(items) and items[end].result:
        end += 1
    return end


def match(line: Sequence[Keyed], history: Sequence[Keyed]) -> Match:
    """How far ``history`` agrees with ``line``; see :class:`Match`."""
    i = j = 0
    pairs: list[tuple[int, int]] = []
    while i < len(line) and j < len(history):
        if line[i].result and history[j].result:
            li, hj = _run(line, i), _run(history, j)
            have, want = Counter(x.key for x in line[i:li]), Counter(x.key for x in history[j:hj])
            if have == want or (li == len(line) and not have - want):
                # The step's results agree (the line may hold only some of them yet, when it
                # ends there): each pairs with a line entry of its key, the others are new.
                free: dict[str, list[int]] = {}
                for n in range(i, li):
                    free.setdefault(line[n].key, []).append(n)
                fresh = []
                for n in range(j, hj):
                    slots = free.get(history[n].key)
                    if slots:
                        pairs.append((n, slots.pop(0)))
                    else:
                        fresh.append(n)
                i = li
                if fresh:
                    return Match(i, tuple(pairs), (*fresh, *range(hj, len(history))))
                j = hj
                continue
            break
        if line[i].key != history[j].key:
            break
        pairs.append((j, i))
        i += 1
        j += 1
    return Match(i, tuple(pairs), tuple(range(j, len(history))))
