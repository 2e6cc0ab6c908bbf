"""What an assembly returns: messages, actions, metrics, a proposed checkpoint, the next state.

Every engine returns the same :class:`Assembly`; each says what it did with :class:`Action`
values (the shared vocabulary is here; an engine may add its own subclasses). All of it is
values. Equality and :meth:`Assembly.fingerprint` ignore ``durationMs``, the only
field that differs between two runs of the same input (OBS-1 logs it; determinism checks must
not see it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ContextPressureLoop
from ..messages import EvidenceRef, Message, canonical_json, message_to_dict, sha256_hex

__all__ = [
    "Action",
    "Assembly",
    "Bounded",
    "CheckpointProposal",
    "Checkpointed",
    "MediaReferenced",
    "Metrics",
    "ProtectedTailOverflow",
    "Referenced",
]


class Action:
    """Something an engine did to make the history fit; subclasses are frozen dataclasses
    whose fields say exactly what (entry ids, seqs, tokens before and after)."""

    __slots__ = ()


class ProtectedTailOverflow(ContextPressureLoop):
    """The newest step and the K newest results do not fit even bounded head+tail (LIM-5).

    Same code as its parent: the fill/derive cycle cannot free enough room, and the engine
    stops instead of deriving again and again.
    """


@dataclass(frozen=True, slots=True)
class Referenced(Action):
    """Stage 1 (LIM-2): a tool result sent as an exact reference. ``decided_at`` is the seq of
    the newest entry when the reference was first needed; it never changes afterwards."""

    entry_id: int
    seq: int
    tokens_before: int
    tokens_after: int
    ref: EvidenceRef
    decided_at: int


@dataclass(frozen=True, slots=True)
class MediaReferenced(Action):
    """LIM-6: images over their reserve sent as a note saying the pixels are not in context."""

    entry_id: int
    seq: int
    images: int
    tokens_before: int
    tokens_after: int
    decided_at: int


@dataclass(frozen=True, slots=True)
class Bounded(Action):
    """LIM-4 / DAG-5: a message too large to send whole, sent head + tail around a marker."""

    entry_id: int
    seq: int
    tokens_before: int
    tokens_after: int
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Checkpointed(Action):
    """Stage 2 (LIM-3): whole steps ``first_seq..last_seq`` stand behind a derived checkpoint."""

    first_seq: int
    last_seq: int
    entries: int
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True, slots=True)
class CheckpointProposal:
    """A derived checkpoint for the caller to persist with ``ledger.add_checkpoint``."""

    message: Message
    first_seq: int
    last_seq: int
    tokens: int
    meta: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Metrics:
    """OBS-1 metrics of one assembly; :meth:`as_dict` uses the SPEC's names.

    ``tokens_masked``: tokens saved by references and bounds; ``tokens_evicted``: tokens of the
    entries a new checkpoint took out of the context; ``tokens_compacted``: tokens of the
    checkpoint message sent; ``session_depth``: entries in the session so far;
    ``session_tool_results``: tool results after the latest checkpoint; ``layer_count``: how
    many kinds of transformation (bound, image note, reference, checkpoint) the messages show.
    """

    tokens_loaded: int
    tokens_evicted: int
    tokens_masked: int
    tokens_compacted: int
    thinking_blocks_removed: int
    budget_utilization: float
    session_depth: int
    session_tool_results: int
    layer_count: int
    duration_ms: float = field(default=0.0, compare=False)

    def as_dict(self, *, timing: bool = True) -> dict[str, int | float]:
        out: dict[str, int | float] = {
            "tokensLoaded": self.tokens_loaded,
            "tokensEvicted": self.tokens_evicted,
            "tokensMasked": self.tokens_masked,
            "tokensCompacted": self.tokens_compacted,
            "thinkingBlocksRemoved": self.thinking_blocks_removed,
            "budgetUtilization": self.budget_utilization,
            "sessionDepth": self.session_depth,
            "sessionToolResults": self.session_tool_results,
            "layerCount": self.layer_count,
        }
        if timing:
            out["durationMs"] = self.duration_ms
        return out


@dataclass(frozen=True, slots=True)
class Assembly:
    """The active memory for one request.

    ``messages`` start with the system messages; ``entry_ids`` gives, per message, the ledger
    entry it stands for (``None`` for instructions and checkpoints). ``history_tokens`` is what
    the messages after the instructions cost, as counted against ``Budget.history_capacity``.
    ``next_state`` is the engine's own value to hand to its next ``assemble`` (``None`` when
    the engine keeps none); callers pass it back without looking inside.
    """

    messages: tuple[Message, ...]
    entry_ids: tuple[int | None, ...]
    history_tokens: int
    breakdown: Mapping[str, int | float | str | None]
    actions: tuple[Action, ...]
    metrics: Metrics
    checkpoint_to_store: CheckpointProposal | None
    next_state: object = None

    def __post_init__(self) -> None:
        if not isinstance(self.breakdown, MappingProxyType):
            object.__setattr__(self, "breakdown", MappingProxyType(dict(self.breakdown)))

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of the messages: equal inputs give equal fingerprints."""
        return sha256_hex(canonical_json([message_to_dict(m) for m in self.messages]))


def utilization(used: int, limit: int) -> float:
    # Rounded so the value is a stable decimal in logs and JSON.
    return round(used / limit, 6) if limit > 0 else math.inf
