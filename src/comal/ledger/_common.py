"""Pure logic both backends share, so SQLite and PostgreSQL agree byte for byte (LED-4).

What a step may contain, how a message becomes a stored body and its digests, where a token-budget
tail starts, how a search hit is cut, and how a selected row becomes a value (both backends
select the same columns in the same order): none of it touches a database.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import re2

from .._regex import PatternError, compile_linear, searchable
from ..errors import UserError
from ..messages import (
    Message,
    Role,
    group_messages,
    message_to_json,
    sha256_hex,
)
from ..tokens import TokenCounter, count_message
from ._bodies import pack, pack_many
from ._errors import LedgerCorrupt, SearchTooBroad
from ._model import Entry, EntryHead, Scope, SearchHit
from ._rows import damaged_index, whole


def check_step_shape(messages: Sequence[Message], *, joining: bool) -> None:
    """A step is whole by construction: one group (a message, or an assistant message and the
    results of its calls). Results joining an open step are tool messages only."""
    for i, msg in enumerate(messages):
        if not isinstance(msg, Message):
            raise UserError(f"step item {i} is {type(msg).__name__}, not a Message")
    if joining:
        if any(m.role is not Role.TOOL for m in messages):
            raise UserError("only tool results can join an open step")
        return
    groups = group_messages(messages)
    if len(groups) != 1:
        starts = ", ".join(messages[g.start].role.value for g in groups)
        raise UserError(
            f"these messages form {len(groups)} steps ({starts}); a step is one message, or one "
            "assistant message and the results of its calls: append each step separately "
            "(or use append_steps)"
        )


@dataclass(frozen=True, slots=True)
class Prepared:
    """A message as it is stored: canonical body, its digests, size and token count."""

    message: Message
    body: str
    stored: str | bytes  # what the row holds: the body, or its zstd frame (see _bodies)
    digest: str
    output_digest: str | None
    call_id: str | None
    tokens: int
    size: int

    def entry(self, entry_id: int, session: str, seq: int, step: int, created: str) -> Entry:
        return Entry(
            entry_id,
            session,
            seq,
            step,
            self.message.role.value,
            self.tokens,
            self.size,
            created,
            self.digest,
            self.output_digest,
            self.message,
        )


def prepare(counter: TokenCounter, message: Message, *, packs: bool = False) -> Prepared:
    """``packs``: the backend stores large bodies compressed (the digest stays the text's)."""
    body = message_to_json(message)
    raw = body.encode("utf-8", "surrogatepass")
    return _prepared(message, body, raw, pack(body, raw) if packs else body, counter)


def prepare_many(
    counter: TokenCounter, messages: Sequence[Message], *, packs: bool = False
) -> list[Prepared]:
    """:func:`prepare` of a batch (an import's), its bodies compressed while it is counted."""
    if not packs:
        return [prepare(counter, m) for m in messages]
    bodies = [message_to_json(m) for m in messages]
    raws = [b.encode("utf-8", "surrogatepass") for b in bodies]
    packed = pack_many(bodies, raws)
    counts = [count_message(counter, m) for m in messages]
    return [
        _prepared(m, body, raw, stored, tokens)
        for m, body, raw, stored, tokens in zip(
            messages, bodies, raws, packed(), counts, strict=True
        )
    ]


def _prepared(
    message: Message, body: str, raw: bytes, stored: str | bytes, tokens: TokenCounter | int
) -> Prepared:
    result = message.tool_result
    return Prepared(
        message,
        body,
        stored,
        hashlib.sha256(raw).hexdigest(),
        sha256_hex(result.text) if result is not None else None,
        result.call_id if result is not None else None,
        tokens if isinstance(tokens, int) else count_message(tokens, message),
        len(raw),
    )


def usage_anchor(entries: Sequence[Entry]) -> Entry:
    """The entry a step's measured usage belongs to: its assistant message, else its last."""
    return next((e for e in entries if e.role == Role.ASSISTANT.value), entries[-1])


def tail_start(newest_first: Iterable[tuple[int, int, int]], budget: int) -> int | None:
    """Seq of the first entry of the longest run of whole steps that fits ``budget``.

    ``newest_first`` yields (seq, step, tokens) from the newest entry back; it is consumed only
    as far as the budget reaches, so a caller streaming from an index pays for the tail alone.
    """
    used = 0
    start: int | None = None
    step_tokens = 0
    for seq, step, tok in newest_first:
        if not (whole(seq) and whole(step) and whole(tok)):
            raise damaged_index(None, "the entry index holds a value that is not a number")
        step_tokens += tok
        if seq == step:  # reached the first entry of a step: the whole step is counted
            if used + step_tokens > budget:
                break
            used += step_tokens
            step_tokens = 0
            start = seq
    return start


def regex_hits(entries: Iterable[Entry], pattern: str, limit: int) -> list[SearchHit]:
    """RE2 over each message's text (linear time: patterns come from users and models), so both
    backends speak one regex dialect."""
    try:
        compiled = compile_linear(pattern)
    except PatternError as exc:
        raise UserError(str(exc)) from None
    hits: list[SearchHit] = []
    for e in entries:
        found = [m.span() for m in compiled.finditer(searchable(e.message.text))]
        if found:
            hits.append(hit(e, None, spans=tuple(found)))
            if len(hits) >= limit:
                break
    return hits


def words(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query) if w.upper() not in {"AND", "OR", "NOT", "NEAR"}]


@dataclass(frozen=True)
class LiteralText:
    """A query read as written: case aside, any run of white space for one, and whole words
    at its ends (``x.y()`` is found in ``call x.y()``, not in ``x y`` nor in ``ax.y()``).

    The text runs on RE2 like every pattern (:mod:`comal._regex`): each character that is
    not a letter or a digit is written as its code point, so nothing in the query is syntax.
    RE2 has no lookaround, so the word boundaries at the ends are checked here, per match."""

    pattern: re2._Regexp[str]
    head: bool  # the query starts with a letter or a digit: none may come before it
    tail: bool  # ... ends with one: none may come after it

    MAX_SPANS: ClassVar[int] = 100  # matches marked per entry; finding one decides the hit

    @classmethod
    def of(cls, query: str) -> LiteralText | None:
        chunks = searchable(query).split()
        if not chunks:
            return None
        body = _SPACE.join("".join(map(_escaped, c)) for c in chunks)
        try:
            pattern = compile_linear(body, ignore_case=True)
        except PatternError:
            raise SearchTooBroad(
                f"the text is {len(query):,} characters, too long to search as written: "
                "search a shorter, distinctive part of it"
            ) from None
        return cls(pattern, _is_word(chunks[0][0]), _is_word(chunks[-1][-1]))

    def spans(self, text: str) -> tuple[tuple[int, int], ...]:
        text = searchable(text)
        found: list[tuple[int, int]] = []
        pos = 0
        while len(found) < self.MAX_SPANS and (m := self.pattern.search(text, pos)) is not None:
            a, b = m.span()
            if (not self.head or a == 0 or not _is_word(text[a - 1])) and (
                not self.tail or b == len(text) or not _is_word(text[b])
            ):
                found.append((a, b))
                pos = b
            else:  # inside a word: the next try starts one character on
                pos = a + 1
        return tuple(found)


# What str.split() splits on (RE2's \s is ASCII only): any run of it stands for any other.
_SPACE = r"[\x{9}-\x{d}\x{1c}-\x{1f}\x{85}\p{Z}]+"


def _is_word(ch: str) -> bool:
    # What the full-text indexes keep in a word: letters and digits (``_`` separates).
    return ch.isalnum()


def _escaped(ch: str) -> str:
    return ch if ch.isalnum() else f"\\x{{{ord(ch):x}}}"


def literal_hit(e: Entry, literal: LiteralText) -> SearchHit | None:
    """The entry as a hit of a literal search, or None when its text does not hold it."""
    spans = literal.spans(e.message.text)
    return hit(e, None, spans=spans) if spans else None


def hit(
    e: Entry,
    query_words: list[str] | None,
    offsets: tuple[int, ...] = (),
    *,
    spans: tuple[tuple[int, int], ...] = (),
) -> SearchHit:
    """A hit on ``e``: its snippet around the first match, each match in it marked."""
    text = e.message.text
    if spans:
        offsets = tuple(s for s, _ in spans)
    elif not offsets and query_words:
        lowered = text.lower()
        spans = tuple((i, i + len(w)) for w in query_words if (i := lowered.find(w.lower())) >= 0)
        offsets = tuple(s for s, _ in spans)
    start = _snippet_start(offsets)
    shown = snippet(text, offsets)
    marks = tuple(
        (max(a - start, 0), min(b - start, len(shown)))
        for a, b in sorted(spans)
        if b > a and a < start + len(shown) and b > start
    )
    return SearchHit(e.id, e.seq, e.role, shown, tuple(sorted(offsets)), _disjoint(marks))


def _disjoint(marks: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Sorted marks with overlaps merged (two words of one query can overlap)."""
    merged: list[tuple[int, int]] = []
    for a, b in marks:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return tuple(merged)


def found_at(text: str, query_words: list[str]) -> tuple[int, ...]:
    lowered = text.lower()
    return tuple(i for w in query_words if (i := lowered.find(w.lower())) >= 0)


_BEFORE, _AFTER = 80, 160


def _snippet_start(offsets: tuple[int, ...]) -> int:
    return max(0, min(offsets) - _BEFORE) if offsets else 0


def snippet(text: str, offsets: tuple[int, ...]) -> str:
    first = min(offsets) if offsets else 0
    return text[_snippet_start(offsets) : first + _AFTER].replace("\n", " ")


def in_order(
    target: str, scope: Scope, ids: Sequence[int], found: dict[int, Entry], start: int, end: int
) -> list[Entry]:
    """The entries ``ids`` (read from an index) as the table holds them, checked against it.

    An id the table does not have, or a row of another session or out of the range or order
    the index gave, means index and table disagree: a damaged database, reported as such rather
    than returned as a shorter or shuffled history.
    """
    out: list[Entry] = []
    last = start - 1
    for i in ids:
        e = found.get(i)
        if e is None or e.session != scope.session or not last < e.seq <= end:
            raise LedgerCorrupt(
                target,
                f"the entry index of session {scope.session} lists entry {i}, which the table "
                + ("does not hold" if e is None else f"holds at session {e.session} seq {e.seq}"),
                "run `comal verify`, and restore the ledger from a backup",
            )
        last = e.seq
        out.append(e)
    return out


def heads_of(target: str, scope: Scope, rows: Iterable[Sequence[Any]]) -> list[EntryHead]:
    """Index rows (id, seq, step, role, tokens) as heads, refusing values a damaged index holds."""
    out = []
    for r in rows:
        if not (all(whole(r[k]) for k in (0, 1, 2, 4)) and isinstance(r[3], str)):
            raise damaged_index(target, f"the entry index of session {scope.session} is not sound")
        out.append(EntryHead(r[0], r[1], r[2], r[3], r[4]))
    return out
