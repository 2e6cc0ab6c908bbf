"""Searching the entries a summary stands for, exact text first (ENG-4).

A summary keeps a minority of its chunk's exact values (paths, identifiers, numbers,
commands); the rest must be one recall call away. A session-wide BM25 search ranks a short
number or an identifier below longer matches of its words, so ``ctx_search(query=...,
within=SUMMARY)`` searches only the entries the summary covers, and ranks an entry that holds
the query *verbatim* first (case-sensitive, then case-insensitive), then entries by how many of
the query's words they hold; a verbatim match as a whole token (``37`` in ``status 37``, not
in ``unit_37``) ranks above one inside a longer word. The text searched is what the summarizer
read of each entry: the message's text or the tool's output, and each call's name and exact
arguments (a command is found where it ran). Each hit shows the matched text. Pure: the caller
reads the entries (a summary's range is bounded by its chunks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..ledger import Entry
from ..messages import Text
from ..safe_text import one_line

__all__ = ["WithinHit", "entry_text", "search_within", "values_of"]

_WORD = re.compile(r"\w+")
_AROUND = 80


@dataclass(frozen=True, slots=True)
class WithinHit:
    """One entry that matched: ``exact`` when it holds the query verbatim; ``snippet`` the
    matched text with what is around it, on one line."""

    entry: Entry
    score: float
    exact: bool
    snippet: str


def entry_text(entry: Entry) -> str:
    """What a summarizer read of ``entry``: its text (a tool's output) and its calls, each
    with its exact arguments and, for JSON arguments, each text value as written (a command
    with its quotes and newlines, not as JSON escapes them)."""
    m = entry.message
    result = m.tool_result
    text = (
        result.text
        if result is not None
        else "".join(p.text for p in m.parts if isinstance(p, Text))
    )
    calls: list[str] = []
    for c in m.tool_calls:
        calls.append(f"{c.name} {c.arguments}")
        calls += _values(c.arguments)
    return "\n".join([text, *calls]) if calls else text


def _values(arguments: str) -> list[str]:
    try:
        found = json.loads(arguments)
    except (ValueError, RecursionError):
        return []
    if not isinstance(found, dict):
        return []
    return [v for v in found.values() if isinstance(v, str) and v]


def _snippet(text: str, at: int, width: int) -> str:
    start = max(0, at - _AROUND)
    end = min(len(text), at + width + _AROUND)
    shown = one_line(text[start:end])
    return ("…" if start else "") + shown + ("…" if end < len(text) else "")


def search_within(entries: Iterable[Entry], query: str, limit: int = 10) -> list[WithinHit]:
    """The entries that hold ``query``, best first (see the module docstring)."""
    wanted = query.strip()
    if not wanted:
        return []
    folded = wanted.casefold()
    words = {w.casefold() for w in _WORD.findall(wanted)}
    hits: list[tuple[float, int, WithinHit]] = []
    token = _token(wanted)
    for entry in entries:
        text = entry_text(entry)
        at = text.find(wanted)
        if at >= 0:
            # As a whole token (``37`` in "status 37", not in "unit_37") ranks above a part.
            whole = token.search(text)
            score = (3.0 if whole else 2.0) + text.count(wanted) / 1_000
            shown = _snippet(text, whole.start() if whole else at, len(wanted))
            hits.append((score, entry.seq, WithinHit(entry, score, True, shown)))
            continue
        lower = text.casefold()
        at = lower.find(folded)
        if at >= 0:
            score = 1.5 + lower.count(folded) / 1_000
            shown = _snippet(text, at, len(wanted))
            hits.append((score, entry.seq, WithinHit(entry, score, True, shown)))
            continue
        present = _words(lower)
        found = [w for w in words if w in present]
        if found:
            score = len(found) / len(words)
            first = min(lower.find(w) for w in found)
            shown = _snippet(text, first, 1)
            hits.append((score, entry.seq, WithinHit(entry, score, False, shown)))
    hits.sort(key=lambda h: (-h[0], h[1]))
    return [h for _, _, h in hits[:limit]]


def _token(value: str) -> re.Pattern[str]:
    """``value`` where it is not part of a longer word (a word character on neither side)."""
    before = r"(?<!\w)" if _WORD.match(value[:1]) else ""
    after = r"(?!\w)" if _WORD.match(value[-1:]) else ""
    return re.compile(before + re.escape(value) + after)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text))


def values_of(entries: Sequence[Entry]) -> str:
    """The searched text of ``entries`` joined: where a chunk's exact values are read from."""
    return "\n".join(entry_text(e) for e in entries)
