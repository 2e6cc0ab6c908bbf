"""Why a recalled text matched a query (DRV-7): exactly, as a phrase, or by some of its words,
and where, with the match marked.

- ``exact``: the query's text as typed, case aside (runs of spaces are one space), not inside
  a longer word: ``hello.txt`` in ``cat hello.txt``, not in ``othello.txt`` nor ``hello.txt2``;
- ``phrase``: the query's words side by side in its order, whatever separates them:
  ``hello txt`` in ``hello-txt`` (what the full-text index calls a phrase);
- ``words``: some of its words, which ones said.

The full-text index splits ``hello.txt`` into ``hello`` and ``txt``, so it alone cannot tell
``hello.txt`` from a text that says hello and mentions a .txt elsewhere; this reads the text
itself. Bounded: patterns are literals run on RE2 (linear time), over the first
:data:`SCAN_CHARS` characters of a text, at most :data:`MAX_SEEN` occurrences looked at each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .._regex import compile_linear
from ..safe_text import one_line

__all__ = ["HOW", "SCAN_CHARS", "Match", "Query", "why"]

HOW = ("exact", "phrase", "words")  # best first
SCAN_CHARS = 1_000_000
MAX_SEEN = 64
MAX_WORDS = 16  # the ledger's MAX_TERMS: the words a query is searched by
SNIPPET_CHARS = 480  # as much as a result line quoted before it said why
MARK = ("«", "»")
_WORD = re.compile(r"\w+")
_BETWEEN = r"[^\pL\pN]+"  # what may separate the words of a phrase (the index's separators)


@dataclass(frozen=True, slots=True)
class Match:
    """Why one result matched: ``how`` (``exact``, ``phrase`` or ``words``), the query's
    ``words`` its text holds, and ``snippet``, the matched text in a short window with the
    match marked «so». ``entry`` names the source entry the snippet is from, when that entry
    matched better than the memory's own text."""

    how: str
    words: tuple[str, ...]
    snippet: str
    entry: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"how": self.how, "words": list(self.words), "snippet": self.snippet,
                "entry": self.entry}  # fmt: skip

    @property
    def rank(self) -> int:
        return HOW.index(self.how)

    def label(self) -> str:
        """How a person reads it: ``exact``, ``phrase``, ``words: hello, txt``."""
        if self.how == "words":
            return "words: " + ", ".join(self.words) if self.words else "words"
        return self.how


@dataclass(frozen=True)
class Query:
    """A query read once: its text as typed and its words, with their patterns."""

    text: str
    words: tuple[str, ...]
    literal: Any  # RE2 pattern of the text, or None
    phrase: Any  # RE2 pattern of the words side by side (two or more), or None
    any_word: Any  # RE2 pattern of any of the words, or None

    @classmethod
    def read(cls, query: str) -> Query:
        literal = " ".join(query.split())
        if len(literal) > 2 and literal[0] == literal[-1] == '"':
            literal = literal[1:-1].strip()  # "hello.txt", quoted as for a phrase search
        ordered = [w.lower() for w in _WORD.findall(query)][:MAX_WORDS]
        words = tuple(dict.fromkeys(ordered))
        if not words:
            return cls(literal, (), None, None, None)
        exact = compile_linear(re.escape(literal), ignore_case=True)
        phrase = None
        if len(ordered) > 1:
            phrase = compile_linear(_BETWEEN.join(map(re.escape, ordered)), ignore_case=True)
        any_word = compile_linear("|".join(map(re.escape, words)), ignore_case=True)
        return cls(literal, words, exact, phrase, any_word)


def _wordy(c: str) -> bool:
    return c.isalnum() or c == "_"


def _find(pattern: Any, text: str) -> tuple[int, int] | None:
    """The first occurrence of ``pattern`` in ``text`` that is not inside a longer word."""
    for seen, m in enumerate(pattern.finditer(text)):
        if seen >= MAX_SEEN:
            return None
        a, b = m.span()
        if a == b:
            continue
        starts = not _wordy(text[a]) or a == 0 or not _wordy(text[a - 1])
        ends = not _wordy(text[b - 1]) or b == len(text) or not _wordy(text[b])
        if starts and ends:
            return a, b
    return None


def _word_spans(q: Query, text: str) -> tuple[tuple[str, ...], list[tuple[int, int]]]:
    """The query's words ``text`` holds as whole words, and where (the first few)."""
    found: dict[str, None] = {}
    spans: list[tuple[int, int]] = []
    for seen, m in enumerate(q.any_word.finditer(text)):
        if seen >= MAX_SEEN or (len(found) == len(q.words) and len(spans) >= 8):
            break
        a, b = m.span()
        word = text[a:b].lower()
        if word in q.words and (a == 0 or not _wordy(text[a - 1])):
            if b == len(text) or not _wordy(text[b]):
                found.setdefault(word)
                spans.append((a, b))
    return tuple(w for w in q.words if w in found), spans


def _piece(text: str) -> str:
    """``text`` on one line, escaped, keeping a space at an edge where it had one."""
    inner = one_line(text)
    lead = " " if text[:1].isspace() else ""
    trail = " " if text[-1:].isspace() and inner else ""
    return lead + inner + trail


def _snippet(text: str, spans: list[tuple[int, int]]) -> str:
    """A window of ``text`` around the first span, each span inside it marked; every piece
    escaped to one line (:func:`~comal.safe_text.one_line`) before the marks go in."""
    if not spans:
        cut = text[:SNIPPET_CHARS]
        return one_line(cut) + ("…" if len(text) > SNIPPET_CHARS else "")
    first = spans[0]
    start = max(0, first[0] - SNIPPET_CHARS // 3)
    end = min(len(text), max(first[1] + SNIPPET_CHARS // 3, start + SNIPPET_CHARS))
    out, at = ["…" if start else ""], start
    for a, b in sorted(spans):
        if a < at or b > end:
            continue
        out += [_piece(text[at:a]), MARK[0], one_line(text[a:b]), MARK[1]]
        at = b
    out += [_piece(text[at:end]), "…" if end < len(text) else ""]
    return "".join(out)


def why(text: str, q: Query, *, phrase_hit: bool = False, explain: bool = True) -> Match:
    """Why ``text`` matched ``q`` (see the module docstring). ``phrase_hit``: the index found
    its words side by side, though the text shows it otherwise (a folded accent). Without
    ``explain`` only the class is found (no words, no snippet): a ranking classes every
    candidate and explains the few it keeps."""
    flat = " ".join(text[:SCAN_CHARS].split())
    if not q.words:
        return Match("words", (), _snippet(flat, []) if explain else "")
    for how, pattern in (("exact", q.literal), ("phrase", q.phrase)):
        span = _find(pattern, flat) if pattern is not None else None
        if span is not None:  # the text holds every word then
            return Match(how, q.words, _snippet(flat, [span]) if explain else "")
    how = "phrase" if phrase_hit else "words"
    if not explain:
        return Match(how, (), "")
    words, spans = _word_spans(q, flat)
    return Match(how, words, _snippet(flat, spans))
