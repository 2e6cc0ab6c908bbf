"""The forms a stored message takes in the pipeline's requests, each a pure function of the
entry (and the setting it names), priced once and remembered in the caller's cache.

- a *placeholder* for a tool result: tool, why it was taken out, call id, what it was about,
  size, and the exact ``EvidenceRead`` call that returns the original bytes. Its text depends
  only on the entry and the rule that made it, so it is frozen by tool-call id: byte-identical
  on every later turn (PIP-2);
- an assistant message without its reasoning blocks (layer 1);
- an assistant message without reasoning tags in its text (layer 2);
- a result over its inline cap, head + tail around a marker naming the rest (layer 7).
"""

from __future__ import annotations

import re

from ...evidence import evidence_call, line_count
from ...ledger import Entry
from ...messages import Message, Part, Reasoning, Text, ToolResult, sha256_hex
from ...tokens import TokenCounter
from .._bound import BoundResult, bound_message
from .._render import EngineCache, media_in, message_tokens, preview_line
from ._tools import ResultFacts

__all__ = [
    "Priced",
    "offloaded",
    "placeholder",
    "recovery_call",
    "strip_reasoning_tags",
    "tags_stripped",
    "without_thinking",
]

Priced = tuple[Message, int]

_TAGS = "think|thinking|reasoning|reflection"
_BLOCK = re.compile(rf"<({_TAGS})\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_CLOSE = re.compile(rf"</({_TAGS})\s*>", re.IGNORECASE)
_OPEN_TO_END = re.compile(rf"<({_TAGS})\b[^>]*>.*\Z", re.IGNORECASE | re.DOTALL)


def strip_reasoning_tags(text: str) -> str:
    """``text`` without reasoning blocks in tags; what is outside the tags stays as it was.

    After the closed blocks are gone, a closing tag left over means the reply began inside a
    block the provider opened for it (DeepSeek-R1 style): everything before it is reasoning.
    An opening tag left over is a block cut short: everything after it is reasoning."""
    if "<" not in text:
        return text
    out = _BLOCK.sub("", text)
    while (close := _CLOSE.search(out)) is not None:
        out = out[close.end() :]
    out = _OPEN_TO_END.sub("", out)
    return text if out == text else out.strip()


def recovery_call(entry: Entry) -> str:
    """The exact call that returns this result's original text, digest-checked."""
    result = entry.message.tool_result
    assert result is not None
    return evidence_call(entry.id, "content", entry.output_digest or sha256_hex(result.text))


def placeholder(
    entry: Entry,
    facts: ResultFacts,
    reason: str,
    counter: TokenCounter,
    cache: EngineCache,
    preview_chars: int,
) -> tuple[Message, int, str]:
    """The placeholder for ``entry``'s result (see the module docstring) and its price."""

    def make() -> tuple[Message, int, str]:
        result = entry.message.tool_result
        assert result is not None
        text = result.text
        call = recovery_call(entry)
        what = preview_line(facts.what, preview_chars)
        about = f": {what}" if what else ""
        media = media_in(entry.message)
        note = f", {len(media)} media part(s) not in this context" if media else ""
        body = (
            f"[{facts.tool} result {reason}. Call {result.call_id}{about}. {len(text):,} "
            f"characters, {line_count(text):,} lines{note}. The ledger keeps it exactly: {call}]"
        )
        part = ToolResult(result.call_id, body, result.is_error, result.name, result.cache)
        message = Message(entry.message.role, (part,), entry.message.name)
        return message, message_tokens(counter, message), call

    key = ("pipeline.placeholder", entry.id, entry.digest, reason, preview_chars, counter.name)
    return cache.references.get(key, make)


def without_thinking(entry: Entry, counter: TokenCounter, cache: EngineCache) -> Priced | None:
    """``entry``'s message without reasoning blocks; None when nothing else is left in it."""

    def make() -> Priced | None:
        parts = tuple(p for p in entry.message.parts if not isinstance(p, Reasoning))
        if not parts:
            return None
        message = Message(entry.message.role, parts, entry.message.name)
        return message, message_tokens(counter, message)

    return cache.references.get(("pipeline.nothink", entry.id, entry.digest, counter.name), make)


def tags_stripped(message: Message) -> tuple[Message, int]:
    """``message`` with reasoning tags taken out of its text parts, and the characters removed.
    A message left without any part keeps a one-line note, so no empty message is sent."""
    parts: list[Part] = []
    removed = 0
    for part in message.parts:
        if isinstance(part, Text):
            clean = strip_reasoning_tags(part.text)
            removed += len(part.text) - len(clean)
            if clean:
                parts.append(Text(clean, part.cache))
            continue
        parts.append(part)
    if not removed:
        return message, 0
    if not parts:
        parts.append(Text("(reasoning in tags removed by comal)"))
    return Message(message.role, tuple(parts), message.name), removed


def offloaded(
    entry: Entry, cap: int, counter: TokenCounter, cache: EngineCache
) -> BoundResult | None:
    """``entry``'s result cut to ``cap`` characters head + tail, or None when it fits."""
    result = entry.message.tool_result
    if result is None or len(result.text) <= cap:
        return None
    return bound_message(entry, max(entry.tokens, 1), cap, counter, cache)
