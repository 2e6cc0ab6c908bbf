"""Stage 1 (LIM-2) and the image reserve (LIM-6): which entries are sent as references.

Stickiness without state
------------------------
Whether an entry is referenced is a function of the *ledger prefix* (the entries since the
latest checkpoint), the budget and the config, never of what earlier processes remembered.
:func:`replay` walks the entries in order as if the engine had assembled after each one. Two
frontiers only ever move forward:

- the *reference frontier*: whenever the history up to entry ``j`` is over the threshold, it
  advances over the oldest entries, referencing each eligible tool result it passes (never an
  error, a never-reference tool, a result at most ``min_reference_tokens``, one of the K newest
  results, or anything in the newest step), until the history is at or under the target; when
  only the K newest results are left and the history is still over the threshold, it goes on
  over them too (``yield_protected_to_references``), never into the newest step;
- the *image frontier*: whenever images take more than their reserve, it advances over the
  oldest entries outside the newest step, replacing their media by notes.

The replay of a longer prefix passes through exactly the states of the shorter one, so a
reference made on one turn is made identically on every later turn until the next checkpoint,
and a resumed process with no memory makes the same decisions. Cost is linear in the entries
after the checkpoint, priced with their stored token counts; only references and notes (what
the engine renders itself) are counted, once each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from ...ledger import Entry
from ...messages import EvidenceRef, Message, group_messages
from ...tokens import REPLY_PRIMING, TokenCounter
from .._bound import BoundResult, bound_message, message_chars
from .._render import (
    EngineCache,
    media_in,
    media_tokens,
    message_tokens,
    priced_reference,
    strip_media,
)
from ._config import EngineConfig, Limits

__all__ = ["Form", "Item", "Replay", "build_items", "replay"]


class Form(IntEnum):
    VERBATIM = 0  # as stored (or bounded, when the message alone is too large)
    NO_MEDIA = 1  # media replaced by notes
    REFERENCE = 2  # the whole result replaced by its exact reference


@dataclass(slots=True)
class Item:
    """One entry on its way into the context, with the variants the engine may send."""

    entry: Entry
    group: int
    group_start: int
    message: Message  # the verbatim form (bounded when over the single-message bound)
    tokens: int
    bounded: BoundResult | None
    image_tokens: int
    is_result: bool
    referable: bool
    cache: EngineCache = field(repr=False)
    form: Form = Form.VERBATIM
    decided_at: int = -1
    _ref: tuple[Message, int, EvidenceRef] | None = field(default=None, repr=False)
    _plain: tuple[Message, int] | None = field(default=None, repr=False)

    def ref(self, counter: TokenCounter, preview_chars: int) -> tuple[Message, int, EvidenceRef]:
        if self._ref is None:
            self._ref = priced_reference(self.entry, preview_chars, counter, self.cache)
        return self._ref

    def plain(self, counter: TokenCounter) -> tuple[Message, int]:
        if self._plain is None:
            msg = strip_media(self.message, self.entry.id)
            self._plain = (msg, message_tokens(counter, msg))
        return self._plain

    def current(self, counter: TokenCounter, preview_chars: int) -> tuple[Message, int]:
        if self.form is Form.REFERENCE:
            msg, tokens, _ = self.ref(counter, preview_chars)
            return msg, tokens
        if self.form is Form.NO_MEDIA:
            return self.plain(counter)
        return self.message, self.tokens


def _facts(entry: Entry, counter: TokenCounter, cache: EngineCache) -> tuple[int, int]:
    """Facts every turn needs and that never change (entries are immutable): the entry's
    length in characters and the tokens of its images, keyed by body digest and counter."""

    def make() -> tuple[int, int]:
        message = entry.message
        images = media_tokens(counter, message) if media_in(message) else 0
        return message_chars(message), images

    return cache.facts.get((entry.digest, counter.name), make)


def build_items(
    entries: tuple[Entry, ...],
    config: EngineConfig,
    limits: Limits,
    counter: TokenCounter,
    cache: EngineCache,
) -> list[Item]:
    """Items for ``entries``: grouped into steps (LIM-4) and bounded where one is too large.

    Every assembly walks the whole history here: what the loop reads of the config is read
    once, and a step's calls are collected only when one of its results has no name."""
    groups = group_messages([e.message for e in entries])
    most_chars, single = config.max_single_message_chars, limits.single_bound
    never, least = config.never_reference_tools, config.min_reference_tokens
    items: list[Item] = []
    for g, group in enumerate(groups):
        calls: dict[str, str] | None = None
        for offset in range(len(group.messages)):
            entry = entries[group.start + offset]
            bounded = None
            message, tokens = entry.message, entry.tokens
            chars, image_tokens = _facts(entry, counter, cache)
            if tokens > single or chars > most_chars:
                bounded = bound_message(entry, single, most_chars, counter, cache)
                message, tokens = bounded.message, bounded.tokens
                image_tokens = media_tokens(counter, message) if media_in(message) else 0
            result = message.tool_result
            referable = False
            if result is not None and not result.is_error and entry.tokens > least:
                stored = entry.message.tool_result
                name = stored.name if stored is not None else None
                if stored is not None and not name:
                    if calls is None:
                        calls = {c.id: c.name for m in group.messages for c in m.tool_calls}
                    name = name or calls.get(stored.call_id)
                referable = name not in never
            items.append(
                Item(
                    entry=entry,
                    group=g,
                    group_start=group.start,
                    message=message,
                    tokens=tokens,
                    bounded=bounded,
                    cache=cache,
                    image_tokens=image_tokens,
                    is_result=result is not None,
                    referable=referable,
                )
            )
    return items


@dataclass(frozen=True, slots=True)
class Replay:
    history: int  # tokens of base + items in their decided forms + reply priming
    images: int  # image tokens still in context
    ref_frontier: int
    media_frontier: int


def replay(
    items: list[Item],
    base_tokens: int,
    limits: Limits,
    config: EngineConfig,
    counter: TokenCounter,
    *,
    offset: int = 0,
) -> Replay:
    """Decide every item's form; see the module docstring. ``base_tokens`` prices what comes
    before the items (pinned system entries and the checkpoint message); ``offset`` is the
    index of ``items[0]`` in the list its ``group_start`` values count from."""
    preview = config.preview_chars
    keep = config.keep_recent_results
    total = base_tokens + REPLY_PRIMING
    images = 0
    results: list[int] = []
    ref_at = media_at = 0
    for j, item in enumerate(items):
        item.form, item.decided_at = Form.VERBATIM, -1
        total += item.tokens
        images += item.image_tokens
        if item.is_result:
            results.append(j)
        newest = item.group_start - offset
        seq = item.entry.seq
        while images > limits.media_reserve and media_at < newest:
            old = items[media_at]
            media_at += 1
            if old.image_tokens and old.form is Form.VERBATIM:
                _, tokens = old.plain(counter)
                total += tokens - old.tokens
                images -= old.image_tokens
                old.form, old.decided_at = Form.NO_MEDIA, seq
        if total <= limits.threshold:
            continue
        protected = results[max(len(results) - keep, 0)] if results else newest
        bound = min(newest, protected)
        total, images, ref_at = _advance(items, bound, total, images, ref_at, limits, counter,
                                         preview, seq)  # fmt: skip
        if total > limits.threshold and config.yield_protected_to_references:
            # Still over with only the K newest results left: they go too, oldest first, down
            # to the target; the newest step stays. The frontier only moves forward, so a later
            # turn's replay passes through this same state (sticky).
            total, images, ref_at = _advance(items, newest, total, images, ref_at, limits,
                                             counter, preview, seq)  # fmt: skip
    return Replay(total, images, ref_at, media_at)


def _advance(
    items: list[Item],
    bound: int,
    total: int,
    images: int,
    ref_at: int,
    limits: Limits,
    counter: TokenCounter,
    preview: int,
    seq: int,
) -> tuple[int, int, int]:
    """Move the reference frontier over ``items[ref_at:bound]`` until the history is at or
    under the target, referencing each eligible result it passes."""
    while total > limits.target and ref_at < bound:
        old = items[ref_at]
        ref_at += 1
        if not old.referable:
            continue
        _, before = old.current(counter, preview)
        _, after, _ = old.ref(counter, preview)
        if after >= before:
            continue  # a reference must save tokens, or the result stays as it is
        total += after - before
        if old.form is Form.VERBATIM:
            images -= old.image_tokens
        old.form, old.decided_at = Form.REFERENCE, seq
    return total, images, ref_at
