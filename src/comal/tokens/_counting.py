"""Counting whole messages with any counter, and picking the best counter available offline.

Providers wrap every message in a few tokens of role markers and delimiters and every tool call
in an id and a structure; images are priced by pixels, not by their bytes. The constants below
are the fixed costs comal adds on top of the counted text. They are deliberately round: the
measured usage anchor (TOK-2) replaces them with the provider's real count after each request.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ..errors import TokenizerUnavailable
from ..messages import (
    Checkpoint,
    EvidenceRef,
    Media,
    Message,
    Opaque,
    Part,
    Reasoning,
    Summary,
    Text,
    ToolCall,
    ToolResult,
)
from ._estimate import EstimatingCounter
from ._tiktoken import TiktokenCounter

__all__ = [
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW_DETAIL",
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "TOOL_RESULT_OVERHEAD",
    "TokenCounter",
    "count_message",
    "count_messages",
    "count_part",
    "default_counter",
]

# Role marker and delimiters around every message: OpenAI's published accounting for cl100k
# chat models is 3 per message + 1 for a name; we round up to 4 for the other providers.
MESSAGE_OVERHEAD = 4
# Tokens that prime the assistant's reply once per request (OpenAI: "<|start|>assistant").
REPLY_PRIMING = 3
# A tool call's id (e.g. "toolu_01..." / "call_...") and the JSON/XML wrapper around it.
TOOL_CALL_OVERHEAD = 12
# A tool result's call id and wrapper.
TOOL_RESULT_OVERHEAD = 8
# One image: Anthropic charges about width*height/750 and downsizes to ~1.15 megapixels, so at
# most ~1,600 tokens; OpenAI's high detail is 765 for 1024x1024. 1,600 bounds both.
IMAGE_TOKENS = 1_600
# OpenAI's fixed price for detail="low".
IMAGE_TOKENS_LOW_DETAIL = 85
# The header of an evidence reference (entry id, field, digest, size) beyond its preview.
EVIDENCE_REF_OVERHEAD = 16


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a string. ``name`` identifies the method (it belongs
    in a configuration digest: changing the counter changes every estimate). ``count`` may be
    called from several threads at once (a ledger counts an append before its write lock)."""

    name: str

    def count(self, text: str) -> int: ...


def _media(part: Media) -> int:
    return IMAGE_TOKENS_LOW_DETAIL if part.detail == "low" else IMAGE_TOKENS


def _opaque(data: str) -> int:
    # Encrypted reasoning (OpenAI encrypted_content, Anthropic redacted_thinking) is base64 of
    # the hidden text: 3 bytes per 4 characters, and the hidden text runs ~4 bytes per token.
    return len(data) * 3 // 16


def count_part(counter: TokenCounter, part: Part) -> int:
    """Tokens of one part as sent to a model: its text plus the fixed costs above."""
    if isinstance(part, Text):
        return counter.count(part.text)
    if isinstance(part, Reasoning):
        visible = "\n".join(t for t in (part.text, *part.summary) if t)
        if visible:
            return counter.count(visible)
        return _opaque(part.data) if part.data else 0
    if isinstance(part, ToolCall):
        return TOOL_CALL_OVERHEAD + counter.count(part.name) + counter.count(part.arguments)
    if isinstance(part, ToolResult):
        if isinstance(part.content, str):
            return TOOL_RESULT_OVERHEAD + counter.count(part.content)
        return TOOL_RESULT_OVERHEAD + sum(count_part(counter, p) for p in part.content)
    if isinstance(part, Media):
        return _media(part)
    if isinstance(part, EvidenceRef):
        header = f"{part.entry_id} {part.field} {part.digest} {part.size_utf16} {part.lines}"
        return EVIDENCE_REF_OVERHEAD + counter.count(header) + counter.count(part.preview)
    if isinstance(part, (Summary, Checkpoint)):
        return counter.count(part.text)
    if isinstance(part, Opaque):
        # What is sent is the block's JSON: its text, keys and all (an image or a PDF inside
        # one is counted as text, which overestimates, never hides, what it costs).
        return counter.count(part.raw)
    raise TypeError(f"cannot count a {type(part).__name__} part")


def count_message(counter: TokenCounter, message: Message) -> int:
    """Tokens of ``message``: every part (see :func:`count_part`) + :data:`MESSAGE_OVERHEAD`.

    Reasoning counts its visible text and summaries; when only the provider's opaque payload is
    kept it is priced from the payload's length. Signatures are not sent as tokens and are free.
    """
    total = MESSAGE_OVERHEAD + sum(count_part(counter, p) for p in message.parts)
    if message.name:
        total += 1 + counter.count(message.name)
    return total


def count_messages(counter: TokenCounter, messages: Iterable[Message]) -> int:
    """Tokens of a whole request's messages, including the reply priming."""
    return REPLY_PRIMING + sum(count_message(counter, m) for m in messages)


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    """The exact cl100k counter when it loads offline, else :class:`EstimatingCounter`.

    Cached for the process; ``default_counter.cache_clear()`` after changing
    ``COMAL_TIKTOKEN_FILE``.
    """
    try:
        return TiktokenCounter()
    except TokenizerUnavailable:
        return EstimatingCounter()
