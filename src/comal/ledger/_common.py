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
from typing import Any

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
from ._errors import LedgerCorrupt
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
        found = [m.start() for m in compiled.finditer(searchable(e.message.text))]
        if found:
            hits.append(hit(e, None, tuple(found)))
            if len(hits) >= limit:
                break
    return hits


def words(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query) if w.upper() not in {"AND", "OR", "NOT", "NEAR"}]


def hit(e: Entry, query_words: list[str] | None, offsets: tuple[int, ...] = ()) -> SearchHit:
    text = e.message.text
    if not offsets and query_words:
        offsets = found_at(text, query_words)
    return SearchHit(e.id, e.seq, e.role, snippet(text, offsets), tuple(sorted(offsets)))


def found_at(text: str, query_words: list[str]) -> tuple[int, ...]:
    lowered = text.lower()
    return tuple(i for w in query_words if (i := lowered.find(w.lower())) >= 0)


def snippet(text: str, offsets: tuple[int, ...]) -> str:
    first = min(offsets) if offsets else 0
    return text[max(0, first - 80) : first + 160].replace("\n", " ")


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
