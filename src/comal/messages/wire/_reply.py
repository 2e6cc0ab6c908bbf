"""What a model call answers, read in and written out: :class:`Reply`, :class:`WireReply`.

A :class:`Reply` is a provider's whole response read into canonical form (the assistant message,
its raw usage and stop word); a :class:`WireReply` is the other way: a reply about to be written
in a protocol's own response shape, its content already in that shape. Both are values; the
protocol (:class:`~comal.messages.wire.WireProtocol`) reads and writes them.

Messages read from a reply carry no prompt-cache hints (:func:`strip_cache`): a client moves its
``cache_control`` breakpoints every turn (Claude Code marks the newest tool result), so the same
message is sent with and without one; the hint belongs to the request, not to the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from .._parts import Message, Opaque, Part, Text, ToolCall, ToolResult

__all__ = ["CONTEXT_LENGTH", "OUTPUT_LENGTH", "Reply", "Stop", "WireReply", "strip_cache"]

# OUT-1: the two length outcomes carry the codes of their errors, so a stop reason, an error code
# and a log line all spell them the same way.
OUTPUT_LENGTH: Final = "OUTPUT_LENGTH"
CONTEXT_LENGTH: Final = "CONTEXT_LENGTH"

Stop: TypeAlias = Literal[
    "end_turn", "tool_use", "OUTPUT_LENGTH", "CONTEXT_LENGTH", "refusal", "error"
]
"""Why the model stopped, whatever the provider called it.

``end_turn`` finished (a stop sequence counts); ``tool_use`` finished with tool calls;
``OUTPUT_LENGTH`` ran out of output tokens; ``CONTEXT_LENGTH`` filled the context window while
generating (Anthropic ``model_context_window_exceeded``; a request rejected for length raises
:class:`~comal.errors.ContextLength` instead); ``refusal`` declined or was filtered; ``error``
any other unfinished outcome (a failed Responses response, an unknown reason). The provider's own
word is kept beside it (:attr:`comal.providers.ModelResponse.raw_stop`).
"""


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete reply read from a protocol's response: the assistant message (``None`` when
    the response holds none), its raw usage object and stop word, the response's id and model."""

    message: Message | None
    usage: dict[str, Any] | None
    stop: str | None
    response_id: str | None
    model: str | None


@dataclass(frozen=True, slots=True)
class WireReply:
    """A reply to write as a protocol's response: ``content`` is already in the protocol's shape
    (content blocks, a message, output items: :attr:`WireProtocol.content` makes it from a
    canonical message), ``stop`` and ``usage`` are the protocol's own word and object; ``detail``
    says why an unfinished reply stopped, where the protocol has a place for it."""

    id: str
    model: str
    content: Any
    stop: str | None
    usage: Mapping[str, Any] | None
    created: int = 0
    detail: str | None = None


def _uncached(part: Opaque) -> Opaque:
    if '"cache_control"' not in part.raw:
        return part
    value = json.loads(part.raw)
    if not isinstance(value, dict) or "cache_control" not in value:
        return part
    del value["cache_control"]
    return replace(part, raw=json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _bare(part: Part) -> Part:
    if isinstance(part, (Text, ToolCall)) and part.cache is not None:
        return replace(part, cache=None)
    if isinstance(part, Opaque):
        return _uncached(part)
    if isinstance(part, ToolResult):
        content = part.content
        if not isinstance(content, str):
            content = tuple(
                replace(p, cache=None)
                if isinstance(p, Text)
                else _uncached(p)
                if isinstance(p, Opaque)
                else p
                for p in content
            )
        return replace(part, content=content, cache=None)
    return part


def strip_cache(message: Message) -> Message:
    """``message`` without prompt-cache hints (see the module docstring)."""
    return Message(message.role, tuple(_bare(p) for p in message.parts), message.name)
