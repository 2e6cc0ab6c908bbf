"""How PostgreSQL stores and queries text for search (LED-5): words and chunked ``tsvector``
literals built in Python so phrases match exactly within a chunk, and FTS5-style queries turned
into ``tsquery`` text. SQLite's FTS5 needs none of this."""

from __future__ import annotations

import re
import unicodedata
from typing import NoReturn

from ._errors import BadSearchQuery

_SEPARATORS = re.compile(r"[\W_]+")
# A tsvector caps lexemes at 2046 bytes, its size at 1 MB, positions at 16383 and 256 positions
# per lexeme: chunks stay well inside all of them, so phrases match exactly within a chunk.
_MAX_WORD_BYTES = 2046
_CHUNK_WORDS = 16_000
_CHUNK_CHARS = 120_000
_MAX_POSITIONS = 256


def search_words(text: str) -> list[str]:
    """The words ``unicode61`` would index: case- and diacritic-folded letters and digits."""
    folded = text.lower()
    if not folded.isascii():
        folded = "".join(
            c for c in unicodedata.normalize("NFD", folded) if not unicodedata.combining(c)
        )
    return [
        w
        for w in _SEPARATORS.split(folded)
        if w and (len(w) <= _MAX_WORD_BYTES // 4 or len(w.encode()) <= _MAX_WORD_BYTES)
    ]


def search_vectors(text: str) -> list[str]:
    """``tsvector`` literals of the text's words with their positions, one per chunk.

    Built here rather than by ``to_tsvector``: PostgreSQL's parser recognises numbers, hosts and
    paths and would split some words (``39e5ſ``) differently from the query, which is built from
    the same :func:`search_words`.
    """
    words = search_words(text)
    vectors: list[str] = []
    start = 0
    while start < len(words):
        end = min(len(words), start + _CHUNK_WORDS)
        if sum(map(len, words[start:end])) + end - start > _CHUNK_CHARS:
            # Rare (long words): walk to where the character budget runs out.
            end, chars = start, 0
            while end < len(words) and chars < _CHUNK_CHARS:
                chars += len(words[end]) + 1
                end += 1
        positions: dict[str, list[int]] = {}
        for i, w in enumerate(words[start:end], start=1):
            positions.setdefault(w, []).append(i)
        # Words hold only letters and digits, so quoting them needs no escapes.
        vectors.append(
            " ".join(
                f"'{w}':{','.join(map(str, at[:_MAX_POSITIONS]))}" for w, at in positions.items()
            )
        )
        start = end
    return vectors


# Outside quotes FTS5 accepts barewords (ASCII letters, digits, underscore, any non-ASCII) and
# a few operators; anything else is a syntax error there, so it is one here too.
TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"]|"")*")|(?P<word>[A-Za-z0-9_\x1a\x80-\U0010ffff]+)|(?P<op>[()*+,]))'
)
_KEYWORDS = {"AND", "OR", "NOT"}


def fts_query(query: str) -> str | None:
    """Translate an FTS5 query into ``tsquery`` text; None when it can match nothing.

    Supported: barewords and "quoted phrases" (several words make a phrase), ``word*`` prefixes,
    ``a + b`` phrase joins, implicit AND, AND / OR / NOT with FTS5 precedence, parentheses, and
    ``NEAR(a b, n)``, which is read as AND (PostgreSQL phrases have no "within n words").
    """
    return _Parser(query).parse()


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(query):
            m = TOKEN.match(query, pos)
            if m is None or m.lastgroup is None:
                if not query[pos:].strip():
                    break
                self._fail(f"syntax error near {query[pos:].lstrip()[:12]!r}")
            self.tokens.append((m.lastgroup, m.group(m.lastgroup)))
            pos = m.end()
        self.pos = 0

    def _fail(self, why: str) -> NoReturn:
        raise BadSearchQuery(
            f"bad full-text query {self.query!r}: {why}; fix it, or search without --fts"
        )

    def _peek(self, kind: str, text: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        k, t = self.tokens[self.pos]
        return k == kind and (text is None or t == text)

    def _take(self, kind: str, text: str | None = None) -> str:
        if not self._peek(kind, text):
            self._fail(f"expected {text or kind} at token {self.pos + 1}")
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def parse(self) -> str | None:
        node = self._or()
        if self.pos != len(self.tokens):
            self._fail(f"unexpected {self.tokens[self.pos][1]!r}")
        return node

    def _or(self) -> str | None:
        node = self._and()
        while self._peek("word", "OR"):
            self.pos += 1
            right = self._and()
            node = right if node is None else node if right is None else f"({node} | {right})"
        return node

    def _and(self) -> str | None:
        node = self._not()
        while self._peek("word", "AND"):
            self.pos += 1
            right = self._not()
            node = None if node is None or right is None else f"({node} & {right})"
        return node

    def _not(self) -> str | None:
        node = self._unit()
        while self._peek("word", "NOT"):
            self.pos += 1
            right = self._unit()
            node = node if node is None or right is None else f"({node} & !{right})"
        return node

    def _unit(self) -> str | None:
        if self._peek("op", "("):
            self.pos += 1
            node = self._or()
            self._take("op", ")")
            return node
        # Implicit AND joins adjacent phrases (not parenthesised groups) and binds tightest;
        # FTS5 skips an empty phrase here, where an explicit AND with one matches nothing.
        node = self._nearset()
        while self._starts_phrase():
            right = self._nearset()
            node = right if node is None else node if right is None else f"({node} & {right})"
        return node

    def _starts_phrase(self) -> bool:
        if self._peek("string"):
            return True
        return self._peek("word") and self.tokens[self.pos][1] not in _KEYWORDS

    def _nearset(self) -> str | None:
        if self._peek("word", "NEAR") and self.tokens[self.pos + 1 : self.pos + 2] == [("op", "(")]:
            return self._near()
        return self._phrase()

    def _near(self) -> str | None:
        self.pos += 2
        parts: list[str | None] = []
        while not self._peek("op", ")") and not self._peek("op", ","):
            parts.append(self._phrase())
        if self._peek("op", ","):
            self.pos += 1
            if not self._take("word", None).isdigit():
                self._fail("NEAR distance must be a number")
        self._take("op", ")")
        if not parts:
            self._fail("NEAR needs at least one phrase")
        if any(p is None for p in parts):
            return None
        return "(" + " & ".join(p for p in parts if p is not None) + ")"

    def _phrase(self) -> str | None:
        lexemes: list[str] = []
        while True:
            if not self._starts_phrase():
                self._fail("expected a word or a phrase")
            kind, text = self.tokens[self.pos]
            self.pos += 1
            found = search_words(text[1:-1].replace('""', '"') if kind == "string" else text)
            lexemes += [f"'{w}'" for w in found]
            if self._peek("op", "*"):
                self.pos += 1
                if found:
                    lexemes[-1] += ":*"
            if not self._peek("op", "+"):
                break
            self.pos += 1
        if not lexemes:
            return None
        # Words hold only letters and digits, so quoting them needs no escapes; the parentheses
        # keep a negation from binding to the phrase's first word alone.
        return lexemes[0] if len(lexemes) == 1 else "(" + " <-> ".join(lexemes) + ")"
