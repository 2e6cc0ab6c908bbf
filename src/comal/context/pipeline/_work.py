"""The assembly in progress, and what each layer says it did.

A :class:`Work` is the ordered tuple of :class:`Slot` values the request will send (system
first), each with its current message and price. Layers take a ``Work`` and return a new one
with a :class:`LayerReport`; nothing is mutated. The actions here are the pipeline's additions
to the shared vocabulary (:mod:`comal.context._assembly`): each names the entry, the layer,
whether it is new this turn (so a cache-break detector can tell a deliberate edit from a
bust), and, for anything taken out, the exact call that brings the original back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...ledger import Entry
from ...messages import Message
from .._assembly import Action

__all__ = [
    "Cut",
    "Edit",
    "LayerReport",
    "Offloaded",
    "Placeholdered",
    "Rebased",
    "Reread",
    "Restored",
    "Slot",
    "Summarized",
    "TagsStripped",
    "ThinkingCleared",
    "Windowed",
    "Work",
]


@dataclass(frozen=True, slots=True)
class Edit:
    """A placeholder decision: the point it landed at, the layer (by position) that made it
    and why. Between two decisions for one result the earlier one wins, so a placeholder once
    sent never changes its text."""

    due: int
    layer: int
    reason: str


@dataclass(frozen=True, slots=True)
class Slot:
    """One message of the request. ``zone``: system, pinned, head, summary, restore or tail;
    ``index`` is the position in the tail (-1 elsewhere)."""

    message: Message
    tokens: int
    zone: str
    entry: Entry | None = None
    index: int = -1
    edit: Edit | None = None
    form: str = "verbatim"

    def with_message(self, message: Message, tokens: int, form: str) -> Slot:
        return replace(self, message=message, tokens=tokens, form=form)


Work = tuple[Slot, ...]


def history_tokens(work: Work) -> int:
    return sum(s.tokens for s in work if s.zone != "system")


@dataclass(frozen=True, slots=True)
class LayerReport(Action):
    """One layer's own metrics: how many items it changed and the history tokens before and
    after it ran. ``order`` is its place in the pipeline (1..10)."""

    layer: str
    order: int
    items: int
    tokens_before: int
    tokens_after: int
    new: int = 0

    @property
    def acted(self) -> bool:
        return self.items > 0


@dataclass(frozen=True, slots=True)
class ThinkingCleared(Action):
    """Layer 1: reasoning blocks of an assistant message outside the kept turns."""

    entry_id: int
    seq: int
    blocks: int
    tokens_before: int
    tokens_after: int
    new: bool


@dataclass(frozen=True, slots=True)
class TagsStripped(Action):
    """Layer 2: reasoning tags (``<think>…</think>``) taken out of an assistant's text."""

    entry_id: int
    seq: int
    chars_removed: int


@dataclass(frozen=True, slots=True)
class Windowed(Action):
    """Layer 3: user turns before the kept window, left out of the request (not the ledger)."""

    first_seq: int
    last_seq: int
    entries: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Placeholdered(Action):
    """Layers 4-6: a tool result sent as a placeholder naming the exact recovery call."""

    entry_id: int
    seq: int
    call_id: str
    layer: str
    reason: str
    tokens_before: int
    tokens_after: int
    decided_at: int
    new: bool
    recovery: str


@dataclass(frozen=True, slots=True)
class Reread(Action):
    """OBS-2 ``reread``: a result that supersedes an earlier one of the same key (the same
    file read again, the same command run again)."""

    entry_id: int
    seq: int
    supersedes: int
    key: str


@dataclass(frozen=True, slots=True)
class Offloaded(Action):
    """Layer 7: a result over its inline cap sent head + tail; the rest stays in the ledger."""

    entry_id: int
    seq: int
    tokens_before: int
    tokens_after: int
    recovery: str


@dataclass(frozen=True, slots=True)
class Summarized(Action):
    """Layer 8: the stored summary standing for ``first_seq..last_seq`` (middle-out)."""

    first_seq: int
    last_seq: int
    tokens: int
    level: str
    summarizer: str
    head_entries: int
    new: bool


@dataclass(frozen=True, slots=True)
class Restored(Action):
    """Layer 9: context re-injected after a summary."""

    tokens: int
    instructions_chars: int
    files: int
    request: bool


@dataclass(frozen=True, slots=True)
class Cut(Action):
    """Layer 10: over the window with no summary to lean on, the oldest tail steps left out."""

    first_seq: int
    last_seq: int
    entries: int
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class Rebased(Action):
    """A deliberate edit below the previous cache fence: a new summary, the history window
    sliding, masking switching on or off, an emergency cut. ``stable_messages``: the leading
    messages that are still byte-identical to the previous request's."""

    reason: str
    stable_messages: int
