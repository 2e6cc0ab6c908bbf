"""What a search query means, and what it may cost, decided before any statement runs (LED-5).

Three ways to read the text of a query, the same on both backends (each is turned into an FTS5
query, which PostgreSQL's dialect translates into a ``tsquery``):

- ``phrase`` (the default of :meth:`~comal.ledger.SQLiteLedger.search`): the text is literal.
  It is quoted whole, so the backend splits it into words exactly as it split the stored text,
  and those words must appear in that order. Punctuation separates words and means nothing
  else: ``django.setup()``, ``create-next-app``, ``AND`` or an unclosed quote are words to find,
  never syntax. A text without a word finds nothing. :meth:`~comal.ledger.SQLiteLedger.search`
  then keeps only the entries holding the text itself (:class:`._common.LiteralText`).
- ``words``: literal too, any of the text's words, ranked (BM25 / ``ts_rank``): a question need
  not match every word.
- ``fts``: FTS5 query syntax (operators, ``"phrases"``, ``prefix*``, ``NEAR``), for a person who
  asks for it (``comal search --fts``); a query that does not parse is :class:`BadSearchQuery`.

**Limits.** A query's cost grows with its words, and in FTS syntax with each prefix (one prefix
can stand for thousands of indexed words): over :data:`MAX_WORDS` distinct words,
:data:`MAX_PHRASE_WORDS` words in a phrase, :data:`MAX_TERMS` terms or :data:`MAX_PREFIXES`
prefixes a query is :class:`SearchTooBroad`, and no search returns more than :data:`MAX_HITS`
hits. Time is bounded separately, by the database (``ledger.bounded(seconds)``).
"""

from __future__ import annotations

import re
from typing import Literal

from ._errors import SearchTooBroad
from ._postgres_fts import TOKEN, search_words
from ._sqlite_fts import fts_text

__all__ = [
    "MAX_HITS",
    "MAX_PHRASE_WORDS",
    "MAX_PREFIXES",
    "MAX_TERMS",
    "MAX_WORDS",
    "TextMode",
    "match_query",
]

TextMode = Literal["phrase", "words", "fts"]

MAX_WORDS = 32
MAX_PHRASE_WORDS = 64
MAX_TERMS = 32
MAX_PREFIXES = 4
MAX_HITS = 1000
_KEYWORDS = {"AND", "OR", "NOT", "NEAR"}


def match_query(query: str, mode: TextMode) -> str | None:
    """The FTS5 query ``mode`` makes of ``query``, or None when it can match nothing; raises
    :class:`SearchTooBroad` over the limits."""
    if mode == "phrase":
        return _phrase(query)
    if mode == "words":
        return _any_word(query)
    _check_fts(query)
    return query


def _phrase(query: str) -> str | None:
    # FTS5 ends a string at NUL, and SQLite cannot bind a lone surrogate; both separate words
    # (and stored text is indexed with the same replacement), so nothing findable is lost.
    text = fts_text(query.replace("\x00", " "))
    found = search_words(text)
    if not found:
        return None
    if len(found) > MAX_PHRASE_WORDS:
        raise SearchTooBroad(
            f"the phrase has {len(found)} words; a phrase search takes at most "
            f"{MAX_PHRASE_WORDS}: search for a shorter, distinctive part of it"
        )
    return '"' + text.replace('"', '""') + '"'


def _any_word(query: str) -> str | None:
    found = list(dict.fromkeys(re.findall(r"\w+", query.lower())))
    if not found:
        return None
    if len(found) > MAX_WORDS:
        raise SearchTooBroad(
            f"the query has {len(found)} different words; a words search takes at most "
            f"{MAX_WORDS}: keep the distinctive ones"
        )
    # Words hold no quote, so each is a quoted FTS5 string as it is.
    return " OR ".join(f'"{w}"' for w in found)


def _check_fts(query: str) -> None:
    """Count an FTS5 query's terms and prefixes; where it does not tokenize, the backend's own
    parser reports the syntax error."""
    terms = prefixes = 0
    pos = 0
    while pos < len(query):
        m = TOKEN.match(query, pos)
        if m is None:
            break
        kind, text = m.lastgroup, m.group(m.lastgroup or 0)
        if kind == "string":
            terms += len(search_words(text[1:-1]))
        elif kind == "word" and text not in _KEYWORDS:
            terms += 1
        elif text == "*":
            prefixes += 1
        pos = m.end()
    if terms > MAX_TERMS:
        raise SearchTooBroad(
            f"the full-text query has {terms} terms; at most {MAX_TERMS}: use fewer words"
        )
    if prefixes > MAX_PREFIXES:
        raise SearchTooBroad(
            f"the full-text query has {prefixes} prefix searches (word*); at most "
            f"{MAX_PREFIXES}, as each stands for every indexed word it starts: use whole words"
        )
