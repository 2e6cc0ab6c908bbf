"""Entry reads and search (LED-5), written once for both backends.

Ids and the small columns come from the covering index (``entries_budget``); bodies are read
only for ids the bounded cache of decoded entries lacks, so an agent reading the same tail every
turn decodes only what was appended since. A token-budget tail walks the index backwards in
pages and stops at the budget: its cost follows the tail, not the session.

Full-text search ranks with the backend's engine (FTS5's BM25, PostgreSQL's ``ts_rank``) over
the same words; regexes run on RE2 in Python over the texts (:mod:`comal._regex`: patterns come
from users and models), so a pattern means the same on both backends. What a query's text means
(literal by default) and the limits checked before it runs are in :mod:`._query`; a search's
time is bounded by ``bounded()``, which its Python scans check as they go.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._regex import PatternError, compile_linear, searchable
from ..errors import UserError
from ._common import (
    LiteralText,
    found_at,
    heads_of,
    hit,
    in_order,
    literal_hit,
    regex_hits,
    snippet,
    tail_start,
    words,
)
from ._db import Db
from ._model import Entry, EntryHead, Scope, SearchHit
from ._query import MAX_HITS, TextMode, match_query
from ._rows import COLUMNS, entry_from_row
from ._store import StoreBase
from ._summaries import summary_rows
from ._text import check_int, storable

_ENTRY_COLS = COLUMNS["entries"]
_PAGE = 500
RecallMode = Literal["words", "phrase", "fts", "regex"]


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One ``ctx_search`` result: an entry (``kind`` "entry", ``seq`` its seq) or a summary
    (``kind`` "summary", ``seq``..``last_seq`` its coverage); ``score`` higher is better."""

    kind: str
    id: int
    seq: int
    last_seq: int
    role: str
    snippet: str
    score: float
    depth: int | None = None


class Reads(StoreBase):
    """Every read takes a Scope and reads nothing when it does not resolve (LED-2)."""

    def _entries(self, sql: str, args: Sequence[Any]) -> list[Entry]:
        with self._reading() as c:
            rows = c.execute(sql, tuple(args)).fetchall()
        return [entry_from_row(self._sealer, r) for r in rows]

    def _load(self, ids: list[int]) -> dict[int, Entry]:
        """Entries by id: decoded ones from the cache, the rest read in batches."""
        found = self._cache.get_many(ids)
        missing = [i for i in ids if i not in found]
        for k in range(0, len(missing), _PAGE):
            chunk = missing[k : k + _PAGE]
            marks = ", ".join("?" * len(chunk))
            for e in self._entries(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE id IN ({marks})", chunk
            ):
                found[e.id] = e
                self._cache.put(e)
        return found

    def entries(
        self, scope: Scope, *, start_seq: int = 0, end_seq: int | None = None
    ) -> list[Entry]:
        """Entries with ``start_seq <= seq <= end_seq`` in order (ids from the covering index,
        bodies only for those not in the cache)."""
        check_int(start_seq=start_seq, end_seq=end_seq)
        end = end_seq if end_seq is not None else 2**62
        with self._reading() as c:
            if not self._visible(scope):
                return []
            ids = [
                r[0]
                for r in c.execute(
                    f"SELECT id FROM entries{self._dialect.budget_index}"
                    " WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                    (scope.session, start_seq, end),
                ).fetchall()
            ]
            found = self._load(ids)
        return in_order(self.target, scope, ids, found, start_seq, end)

    def iter_entries(self, scope: Scope, *, batch: int = 500) -> Iterator[Entry]:
        """Stream a whole session in batches, so memory stays bounded on huge sessions."""
        seq = 0
        while True:
            chunk = self.entries(scope, start_seq=seq, end_seq=seq + batch - 1)
            if not chunk:
                # Sequences are dense, but a session may be empty or end exactly on a boundary.
                return
            yield from chunk
            seq = chunk[-1].seq + 1

    def heads(self, scope: Scope, *, start_seq: int = 0) -> list[EntryHead]:
        """Small columns only, read from the covering index (no bodies)."""
        check_int(start_seq=start_seq)
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                f"SELECT id, seq, step, role, tokens FROM entries{self._dialect.budget_index}"
                " WHERE session_id = ? AND seq >= ? ORDER BY seq",
                (scope.session, start_seq),
            ).fetchall()
        return heads_of(self.target, scope, rows)

    def tail(self, scope: Scope, *, n: int | None = None, tokens: int | None = None) -> list[Entry]:
        """The newest entries: the last ``n``, or as many whole steps as fit in ``tokens``."""
        if not self._visible(scope):
            return []
        if n is None and tokens is None:
            raise UserError("tail needs n or tokens")
        check_int(n=n, tokens=tokens)
        if n is not None:
            newest = self._entries(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                (scope.session, n),
            )
            return list(reversed(newest))
        assert tokens is not None
        with self._reading() as c:
            start = tail_start(self._newest_first(c, scope), tokens)
        return [] if start is None else self.entries(scope, start_seq=start)

    def _newest_first(self, c: Db, scope: Scope) -> Iterator[tuple[int, int, int]]:
        """(seq, step, tokens) from the newest entry back, read only as far as it is consumed:
        a cursor that steps as it is read (SQLite), else pages that double from a small first
        one, as most tails are a few hundred entries. No Python frame per row: the walk is
        the cost of a warm tail."""
        sql = (
            f"SELECT seq, step, tokens FROM entries{self._dialect.budget_index}"
            " WHERE session_id = ? AND seq < ? ORDER BY seq DESC"
        )
        if self._dialect.lazy_cursor:
            return iter(c.execute(sql, (scope.session, 2**62)))

        def pages() -> Iterator[list[tuple[int, int, int]]]:
            below, page = 2**62, 256
            while True:
                rows = c.execute(f"{sql} LIMIT {page}", (scope.session, below)).fetchall()
                yield rows
                if len(rows) < page:
                    return
                below, page = rows[-1][0], min(page * 2, 4096)

        return itertools.chain.from_iterable(pages())

    def entry(self, scope: Scope, entry_id: int) -> Entry | None:
        check_int(entry_id=entry_id)
        if not self._visible(scope):
            return None
        found = self._load([entry_id]).get(entry_id)
        return found if found is not None and found.session == scope.session else None

    def entry_by_call(self, scope: Scope, call_id: str) -> Entry | None:
        if not self._visible(scope) or not storable(call_id):
            return None
        rows = self._entries(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ? AND call_id = ?"
            " ORDER BY seq LIMIT 1",
            (scope.session, call_id),
        )
        return rows[0] if rows else None

    def search(
        self,
        scope: Scope,
        query: str,
        *,
        regex: bool = False,
        fts: bool = False,
        limit: int = 50,
    ) -> list[SearchHit]:
        """A session's messages that hold ``query`` (LED-5): the text as written by default
        (:class:`._common.LiteralText`, its words found first as :mod:`._query`'s phrase),
        FTS5 syntax with ``fts``, a regex (RE2) with ``regex``; at most ``limit`` (and
        :data:`MAX_HITS`) hits."""
        check_int(limit=limit)
        mode = _search_mode(regex=regex, fts=fts)
        limit = min(limit, MAX_HITS)
        if limit < 1 or not self._visible(scope):
            return []
        if mode == "regex":
            return regex_hits(self._scanned(scope), query, limit)
        match = match_query(query, mode)
        if match is None:
            return []
        if mode == "phrase":
            literal = LiteralText.of(query)
            return [] if literal is None else self._literal(scope, match, literal, limit)
        with self._reading() as c:
            ids = [i for i, _ in self._dialect.ranked(c, "entries_fts", scope, match, limit)]
            found = self._load(ids)
        query_words = words(query)
        return [hit(found[i], query_words) for i in ids if i in found]

    def _literal(
        self, scope: Scope, match: str, literal: LiteralText, limit: int
    ) -> list[SearchHit]:
        """The entries holding the text as written, best ranked first: the index finds its
        words in order (``match``), each candidate's text is then read for the text itself.
        Candidates are asked for in growing batches, at most :data:`MAX_HITS` in all, so a
        phrase whose words are common but whose text is rare still costs a bounded read."""
        hits: list[SearchHit] = []
        seen: set[int] = set()
        want = limit
        while True:
            with self._reading() as c:
                ranked = [i for i, _ in self._dialect.ranked(c, "entries_fts", scope, match, want)]
                fresh = [i for i in ranked if i not in seen]
                found = self._load(fresh)
            for i in fresh:
                seen.add(i)
                self._db.check_deadline()
                h = literal_hit(found[i], literal) if i in found else None
                if h is not None and len(hits) < limit:
                    hits.append(h)
            if len(hits) >= limit or len(ranked) < want or want >= MAX_HITS:
                return hits
            want = min(want * 4, MAX_HITS)

    def _scanned(self, scope: Scope) -> Iterator[Entry]:
        """The session's entries for a scan in Python, each checked against the time bound."""
        for e in self.iter_entries(scope):
            self._db.check_deadline()
            yield e

    # -- the recall tools' search (ctx_search) -------------------------------------------------
    def search_summaries(
        self,
        scope: Scope,
        query: str,
        *,
        regex: bool = False,
        fts: bool = False,
        limit: int = 50,
    ) -> list[RecallHit]:
        """The session's summaries that hold ``query``: literal words in order by default, FTS5
        syntax with ``fts``, a regex with ``regex``."""
        mode = _search_mode(regex=regex, fts=fts)
        return self.recall_search(scope, query, mode=mode, limit=limit, entries=False)

    def recall_search(
        self,
        scope: Scope,
        query: str,
        *,
        mode: RecallMode = "words",
        limit: int = 10,
        entries: bool = True,
        summaries: bool = True,
    ) -> list[RecallHit]:
        """Ranked hits over the session's messages and summaries (``ctx_search``).

        ``mode``: ``words`` (the default), any of the query's words, whatever punctuation it
        holds; ``phrase``, its words in order; ``fts``, FTS5 syntax (see :mod:`._query`);
        ``regex`` (RE2), ranked by the number of matches."""
        check_int(limit=limit)
        limit = min(limit, MAX_HITS)
        if mode not in ("words", "phrase", "fts", "regex"):
            raise UserError(f"mode is words, phrase, fts or regex, not {mode!r}")
        if limit < 1 or not self._visible(scope):
            return []
        if mode == "regex":
            return self._regex_recall(scope, query, limit, entries, summaries)
        text_mode: TextMode = mode
        match = match_query(query, text_mode)
        if match is None:
            return []
        qwords = words(query)
        hits: list[RecallHit] = []
        with self._reading() as c:
            if entries:
                ranked = self._dialect.ranked(c, "entries_fts", scope, match, limit)
                found = self._load([i for i, _ in ranked])
                for eid, score in ranked:
                    e = found.get(eid)
                    if e is not None and e.session == scope.session:
                        h = hit(e, qwords)
                        hits.append(
                            RecallHit("entry", e.id, e.seq, e.seq, e.role, h.snippet, score)
                        )
            ranked = (
                self._dialect.ranked(c, "summaries_text_fts", scope, match, limit)
                if summaries
                else []
            )
            if ranked:
                ids = [i for i, _ in ranked]
                where = f"s.session_id = ? AND s.id IN ({', '.join('?' * len(ids))})"
                by_id = {
                    s.id: s for s in summary_rows(c, self._sealer, where, (scope.session, *ids))
                }
                for sid, score in ranked:
                    s = by_id.get(sid)
                    if s is not None:
                        snip = snippet(s.text, found_at(s.text, qwords))
                        hits.append(RecallHit("summary", s.id, s.first_seq, s.last_seq,
                                              "summary", snip, score, s.depth))  # fmt: skip
        hits.sort(key=lambda h: (-h.score, h.kind != "entry", h.seq, h.id))
        return hits[:limit]

    def _regex_recall(
        self, scope: Scope, pattern: str, limit: int, entries: bool, summaries: bool
    ) -> list[RecallHit]:
        try:
            compiled = compile_linear(pattern)
        except PatternError as exc:
            raise UserError(str(exc)) from None
        hits: list[RecallHit] = []
        for e in self._scanned(scope) if entries else ():
            found = tuple(m.start() for m in compiled.finditer(searchable(e.message.text)))
            if found:
                snip = hit(e, None, found).snippet
                hits.append(RecallHit("entry", e.id, e.seq, e.seq, e.role, snip, float(len(found))))
        if summaries:
            with self._reading() as c:
                every = summary_rows(c, self._sealer, "s.session_id = ?", (scope.session,))
            for s in every:
                self._db.check_deadline()
                found = tuple(m.start() for m in compiled.finditer(searchable(s.text)))
                if found:
                    snip, score = snippet(s.text, found), float(len(found))
                    hits.append(RecallHit("summary", s.id, s.first_seq, s.last_seq, "summary",
                                          snip, score, s.depth))  # fmt: skip
        hits.sort(key=lambda h: (-h.score, h.kind != "entry", h.seq, h.id))
        return hits[:limit]


def _search_mode(*, regex: bool, fts: bool) -> RecallMode:
    """The mode a search's two flags name (literal words in order when neither is set)."""
    if regex and fts:
        raise UserError("a search is full-text (fts) or a regex, not both: choose one")
    return "regex" if regex else "fts" if fts else "phrase"
