"""Bounding one message head + tail around an honest marker (LIM-4, DAG-5).

A message too large for the window cannot be split across requests or dropped without losing
its pair, so it is sent as the start and the end of each large field with a marker in between
that says how much was left out, where (UTF-16 offsets), and the exact EvidenceRead call that
reads the omitted part from the ledger. Reasoning in a bounded message is dropped: its provider
signature covers the whole text, so a cut copy would be rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..evidence import evidence_call, message_text, utf16_len
from ..ledger import Entry
from ..messages import (
    Message,
    Opaque,
    Part,
    Reasoning,
    ResultBlock,
    Text,
    ToolCall,
    ToolResult,
    sha256_hex,
)
from ..messages.wire import render_opaque
from ..tokens import TokenCounter
from ._render import EngineCache, media_in, message_tokens, strip_media

__all__ = ["BoundResult", "bound_message", "message_chars"]

# Shrinking rounds before giving up on reaching the token cap (each round re-prices the message).
_ROUNDS = 8
# Characters always kept on each side, so the model sees how the text starts and ends.
_MIN_SIDE = 40


@dataclass(frozen=True, slots=True)
class BoundResult:
    message: Message
    tokens: int
    fields: tuple[str, ...]
    reasoning_dropped: int


def _fields(message: Message) -> list[tuple[str, str]]:
    """(field name, exact text) of every boundable field, in the order EvidenceRead names them."""
    out: list[tuple[str, str]] = []
    result = message.tool_result
    if result is not None:
        out.append(("content", result.text))
    if any(isinstance(p, Text) for p in message.parts):
        out.append(("text", message_text(message)))
    calls = message.tool_calls
    for i, call in enumerate(calls):
        out.append(("arguments" if len(calls) == 1 else f"arguments[{i}]", call.arguments))
    return out


def message_chars(message: Message) -> int:
    return sum(len(text) for _, text in _fields(message))


def _shares(lengths: list[int], budget: int) -> list[int]:
    """Water-filling: fields shorter than an equal share stay whole, the rest split the rest."""
    shares = [0] * len(lengths)
    left, open_ = budget, sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    while open_:
        even = left // len(open_)
        i = open_[0]
        if lengths[i] <= even:
            shares[i] = lengths[i]
            left -= lengths[i]
            open_.pop(0)
            continue
        for j in open_:
            shares[j] = even
        break
    return shares


def _cut(entry: Entry, field: str, text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    side = max(keep // 2, _MIN_SIDE)
    if len(text) <= 2 * side:
        return text  # too short to leave anything out
    head, tail = text[:side], text[len(text) - side :]
    total = utf16_len(text)
    a, b = utf16_len(head), total - utf16_len(tail)
    lines = text.count("\n", side, len(text) - side)
    call = evidence_call(entry.id, field, sha256_hex(text), offset=a)
    marker = (
        f"\n[… bounded by comal: {b - a:,} of {total:,} UTF-16 units ({lines:,} line breaks) "
        f"left out between offsets {a} and {b}. The stored text is complete; read the rest "
        f"exactly with {call} …]\n"
    )
    return head + marker + tail


def _placeheld(part: ResultBlock) -> ResultBlock:
    # A block comal cannot read cannot be cut either: a bounded message names it instead.
    return Text(render_opaque(part)) if isinstance(part, Opaque) else part


def _rebuild(entry: Entry, cuts: dict[str, str]) -> tuple[Message, int]:
    message = entry.message
    parts: list[Part] = []
    dropped = 0
    text_done = False
    calls = message.tool_calls
    call_index = 0
    for part in message.parts:
        if isinstance(part, Reasoning):
            dropped += 1
        elif isinstance(part, Text):
            if not text_done:
                parts.append(Text(cuts["text"], part.cache))
                text_done = True
        elif isinstance(part, ToolCall):
            name = "arguments" if len(calls) == 1 else f"arguments[{call_index}]"
            call_index += 1
            parts.append(ToolCall(part.id, part.name, cuts[name], part.call_type, part.cache))
        elif isinstance(part, ToolResult):
            content: str | tuple[ResultBlock, ...] = cuts["content"]
            if not isinstance(part.content, str):
                kept = tuple(_placeheld(p) for p in part.content if not isinstance(p, Text))
                content = (Text(cuts["content"]), *kept)
            parts.append(ToolResult(part.call_id, content, part.is_error, part.name, part.cache))
        elif isinstance(part, Opaque):
            parts.append(_placeheld(part))
        else:
            parts.append(part)
    return Message(message.role, tuple(parts), message.name), dropped


def bound_message(
    entry: Entry,
    max_tokens: int,
    max_chars: int,
    counter: TokenCounter,
    cache: EngineCache | None = None,
) -> BoundResult:
    """``entry``'s message with its large fields cut to fit ``max_tokens`` and ``max_chars``.

    Deterministic: the same entry and caps give the same bytes (so the result is remembered,
    in ``cache`` when given). When even the markers and the minimal head and tail exceed
    ``max_tokens`` the smallest version is returned; the caller decides what to do with it.
    """
    if cache is None:
        return _bound(entry, max_tokens, max_chars, counter)
    key = (entry.id, entry.digest, entry.tokens, max_tokens, max_chars, counter.name)
    return cache.bounds.get(key, lambda: _bound(entry, max_tokens, max_chars, counter))


def _bound(entry: Entry, max_tokens: int, max_chars: int, counter: TokenCounter) -> BoundResult:
    fields = _fields(entry.message)
    lengths = [len(text) for _, text in fields]
    total = sum(lengths)
    ratio = max_tokens / max(entry.tokens, 1)
    budget = min(max_chars, int(total * ratio * 0.9))
    best: BoundResult | None = None
    for _ in range(_ROUNDS):
        shares = _shares(lengths, max(budget, 0))
        cuts = {
            name: _cut(entry, name, text, share)
            for (name, text), share in zip(fields, shares, strict=True)
        }
        message, dropped = _rebuild(entry, cuts)
        tokens = message_tokens(counter, message)
        cut_names = tuple(n for (n, t), s in zip(fields, shares, strict=True) if len(t) > s)
        best = BoundResult(message, tokens, cut_names, dropped)
        if tokens <= max_tokens or budget <= 0:
            break
        budget = int(budget * max_tokens / tokens * 0.85)
    assert best is not None
    if best.tokens > max_tokens and media_in(best.message):
        # Pixels cannot be cut in half: media that alone break the cap are replaced by their
        # notes (LIM-6), and the fields say so.
        stripped = strip_media(best.message, entry.id)
        tokens = message_tokens(counter, stripped)
        best = BoundResult(stripped, tokens, (*best.fields, "media"), best.reasoning_dropped)
    return best
