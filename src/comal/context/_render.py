"""How the engine rewrites one stored message: exact references, image notes, token prices.

A referenced tool result keeps its place, call id and name, so its pair stays whole (LIM-4);
its content becomes the rendering of an :class:`~comal.messages.EvidenceRef` (entry id, field,
sha256, size, one-line preview and the exact EvidenceRead call). A tool message holds exactly
one :class:`ToolResult`, so the reference travels as that result's text rather than as a part.
Each rewrite is a pure function of the entry and the config, so it is byte-identical every turn.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar, cast

from ..evidence import line_count, utf16_len
from ..ledger import Entry
from ..messages import (
    Checkpoint,
    EvidenceRef,
    Media,
    Message,
    Part,
    ResultBlock,
    Summary,
    Text,
    ToolResult,
    sha256_hex,
)
from ..messages.wire import render_engine_part
from ..tokens import TokenCounter, count_message, count_part

T = TypeVar("T")

__all__ = [
    "EngineCache",
    "Memo",
    "error_excerpt",
    "media_in",
    "media_note",
    "media_tokens",
    "message_tokens",
    "preview_line",
    "priced_reference",
    "reference",
    "strip_media",
]


# A line that says what went wrong: an exception, a failed assertion or test, a refusal.
_ERROR_WORDS = re.compile(
    r"(?i)(error|exception|traceback|fail|fatal|panic|assert|denied|refused|not found|no such"
    r"|cannot|can't|unable|invalid|timed out|killed)"
)
# The stream labels comal's own Bash result puts before stderr and stdout: never the news.
_LABEL = re.compile(r"^\[(stderr|stdout)\]$")
_EXCERPT_LINES = 4
_EXCERPT_LINE_CHARS = 200
_EXCERPT_CHARS = 600


def error_excerpt(text: str) -> list[str]:
    """The lines of an error output that say what failed, bounded (at most 4 lines of at most
    200 characters, 600 in all): the first line, which names what failed, and the last lines
    that read as an error, where a traceback or a test run states why. The output stays
    whole in the ledger; this is what a checkpoint can afford to show of it."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not _LABEL.match(line):
            lines.append(line)
    if not lines:
        return []
    telling = [i for i, line in enumerate(lines[1:], 1) if _ERROR_WORDS.search(line)]
    if not telling:
        telling = [len(lines) - 1] if len(lines) > 1 else []
    chosen = [0, *telling[-(_EXCERPT_LINES - 1) :]]
    out: list[str] = []
    room = _EXCERPT_CHARS
    for i in chosen:
        line = lines[i]
        cap = min(_EXCERPT_LINE_CHARS, room)
        if cap <= 1:
            break
        line = line if len(line) <= cap else line[: cap - 1] + "…"
        out.append(line)
        room -= len(line)
    return out


def preview_line(text: str, limit: int) -> str:
    """The first non-blank line, cut to ``limit`` characters (an ellipsis marks the cut).

    Lines are found one at a time, so a preview costs the length of the lines before it, not
    of the whole output.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end].strip()
        if line:
            return line if len(line) <= limit else line[: max(limit - 1, 0)] + "…"
        start = end + 1
    return ""


def media_in(message: Message) -> tuple[Media, ...]:
    """Media parts of the message, including those inside a tool result's content."""
    out: list[Media] = []
    for part in message.parts:
        if isinstance(part, Media):
            out.append(part)
        elif isinstance(part, ToolResult) and not isinstance(part.content, str):
            out += [p for p in part.content if isinstance(p, Media)]
    return tuple(out)


def media_tokens(counter: TokenCounter, message: Message) -> int:
    return sum(count_part(counter, m) for m in media_in(message))


def media_note(media: Media, entry_id: int) -> str:
    """LIM-6: say what the media was and that its pixels are not in this context."""
    kind = "image" if media.mime.startswith("image/") else "file"
    facts = [media.mime]
    if media.size is not None:
        facts.append(f"{media.size:,} bytes")
    if media.ref is not None:
        facts.append(f"ref {media.ref}")
    return (
        f"[{kind} ({', '.join(facts)}) kept in the ledger with entry {entry_id}; its pixels are "
        "not in this context, so they have not been seen here. Attach it again to look at it]"
    )


def strip_media(message: Message, entry_id: int) -> Message:
    """The message with every media part replaced by its note; the rest is unchanged."""

    def swap(part: ResultBlock) -> ResultBlock:
        return Text(media_note(part, entry_id)) if isinstance(part, Media) else part

    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, Media):
            parts.append(Text(media_note(part, entry_id)))
        elif isinstance(part, ToolResult) and not isinstance(part.content, str):
            content = tuple(swap(p) for p in part.content)
            parts.append(ToolResult(part.call_id, content, part.is_error, part.name, part.cache))
        else:
            parts.append(part)
    return Message(message.role, tuple(parts), message.name)


def reference(entry: Entry, preview_chars: int) -> tuple[Message, EvidenceRef]:
    """The exact reference standing in for a stored tool result (LIM-2, LED-6)."""
    result = entry.message.tool_result
    if result is None:
        raise ValueError(f"entry {entry.id} is not a tool result")
    text = result.text
    ref = EvidenceRef(
        entry_id=entry.id,
        field="content",
        digest=entry.output_digest or sha256_hex(text),
        size_utf16=utf16_len(text),
        lines=line_count(text),
        preview=preview_line(text, preview_chars),
    )
    rendered = render_engine_part(ref)
    notes = [media_note(m, entry.id) for m in media_in(entry.message)]
    if notes:
        rendered = "\n".join([rendered, *notes])
    part = ToolResult(result.call_id, rendered, False, result.name, result.cache)
    return Message(entry.message.role, (part,), entry.message.name), ref


class Memo:
    """A bounded, thread-safe memo for pure functions of a stored entry.

    Keys name the entry by id and body digest plus every input the value depends on, so
    remembering changes no byte; it only spares re-reading large outputs on every turn.
    """

    def __init__(self, size: int = 8_192) -> None:
        self._size = size
        self._data: OrderedDict[tuple[object, ...], object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...], make: Callable[[], T]) -> T:
        # A hit takes no lock (assemblies look up every entry of the history): each call below
        # is one operation of the C OrderedDict, atomic under the GIL, and a key another
        # thread evicts between them is only made again.
        data = self._data
        try:
            data.move_to_end(key)
            return cast("T", data[key])
        except KeyError:
            pass
        value = make()
        with self._lock:
            self._data[key] = value
            while len(self._data) > self._size:
                self._data.popitem(last=False)
        return value


class EngineCache:
    """What an engine may remember between assemblies of one caller: pure facts of stored
    entries (their length, image tokens, references and bounded forms), keyed by entry id,
    body digest and every input the value depends on.

    The caller owns it (an agent keeps one per session, a replay one per run) and passes it
    to ``assemble``; engines keep no module-global state, so two callers never share one by
    accident and a test sees a cold engine unless it asks for a warm one. Remembering changes
    no byte: it only spares re-reading large outputs on every turn.
    """

    __slots__ = ("bounds", "facts", "references")

    def __init__(self, size: int = 8_192) -> None:
        self.facts = Memo(size * 8)
        self.references = Memo(size)
        self.bounds = Memo(size)


def priced_reference(
    entry: Entry, preview_chars: int, counter: TokenCounter, cache: EngineCache
) -> tuple[Message, int, EvidenceRef]:
    """:func:`reference` with its price (remembered in ``cache``)."""

    def make() -> tuple[Message, int, EvidenceRef]:
        message, ref = reference(entry, preview_chars)
        return message, message_tokens(counter, message), ref

    return cache.references.get((entry.id, entry.digest, preview_chars, counter.name), make)


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens of a message the engine made: engine parts are priced as the text they render
    to (what a provider receives), every other part as :func:`count_message` prices it."""
    engine_types = (EvidenceRef, Summary, Checkpoint)
    engine = [p for p in message.parts if isinstance(p, engine_types)]
    if not engine:
        return count_message(counter, message)
    rest = tuple(p for p in message.parts if not isinstance(p, engine_types))
    base = count_message(counter, Message(message.role, rest, message.name))
    return base + sum(counter.count(render_engine_part(p)) for p in engine)
