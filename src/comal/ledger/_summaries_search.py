"""Search over a session's messages and summaries for the recall tools (``ctx_search``, LED-5).

Words are matched any of them and ranked by the backend's full-text engine (BM25 in SQLite,
``ts_rank`` in PostgreSQL); an FTS5 query passes through; a regex runs on RE2 over the texts
(:mod:`comal._regex`: patterns come from models) and ranks by the number of matches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._regex import PatternError, compile_linear, searchable
from ..errors import UserError
from ._common import hit, words
from ._coordination import StoreHooks
from ._model import Scope, SummaryRecord

__all__ = ["RecallHit", "SummarySearch", "plain_words_query"]


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


def plain_words_query(query: str) -> str | None:
    """An FTS5 query matching any of the words of ``query`` (ranked by BM25), or None when it
    has none: natural-language questions must not need every word to match."""
    found = [w for w in re.findall(r"\w+", query.lower())]
    if not found:
        return None
    unique = list(dict.fromkeys(found))
    return " OR ".join(f'"{w}"' for w in unique)


def _snippet(text: str, query_words: list[str], offsets: tuple[int, ...] = ()) -> str:
    if not offsets and query_words:
        lowered = text.lower()
        offsets = tuple(i for w in query_words if (i := lowered.find(w.lower())) >= 0)
    first = min(offsets) if offsets else 0
    lo = max(0, first - 80)
    return text[lo : first + 160].replace("\n", " ")


class SummarySearch(StoreHooks):
    """The search half of the summary store (mixed into :class:`~._summaries.SummaryStore`)."""

    if TYPE_CHECKING:

        def _summary_rows(self, c: Any, where: str, args: Sequence[Any]) -> list[SummaryRecord]: ...
        def summaries(self, scope: Scope) -> list[SummaryRecord]: ...

    # -- search (LED-5) ---------------------------------------------------------------------
    def search_summaries(
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[RecallHit]:
        """Full-text (FTS5 syntax) or regex search over the session's summaries."""
        return self.recall_search(scope, query, regex=regex, limit=limit, entries=False)

    def recall_search(
        self,
        scope: Scope,
        query: str,
        *,
        regex: bool = False,
        limit: int = 10,
        entries: bool = True,
        summaries: bool = True,
        any_word: bool = True,
    ) -> list[RecallHit]:
        """Ranked hits over the session's messages and summaries (``ctx_search``).

        With ``any_word`` (the default) the query's words are matched, any of them, ranked by
        BM25 (SQLite) or ``ts_rank`` (PostgreSQL), whatever punctuation it holds; otherwise it
        is an FTS5 query passed through; ``regex`` runs Python ``re`` over the texts and ranks
        by the number of matches."""
        if not self._visible(scope):
            return []
        if regex:
            return self._regex_hits(scope, query, limit, entries, summaries)
        match = plain_words_query(query) if any_word else query
        if match is None:
            return []
        qwords = words(query)
        hits: list[RecallHit] = []
        if entries:
            for eid, score in self._fts_entries(scope, match, limit):
                e = self.entry(scope, eid)
                if e is not None:
                    h = hit(e, qwords)
                    hits.append(RecallHit("entry", e.id, e.seq, e.seq, e.role, h.snippet, score))
        if summaries:
            ranked = self._fts_summaries(scope, match, limit)
            found = {s.id: s for s in self._by_ids(scope, [i for i, _ in ranked])}
            for sid, score in ranked:
                s = found.get(sid)
                if s is not None:
                    snip = _snippet(s.text, qwords)
                    hits.append(
                        RecallHit(
                            "summary",
                            s.id,
                            s.first_seq,
                            s.last_seq,
                            "summary",
                            snip,
                            score,
                            s.depth,
                        )
                    )
        hits.sort(key=lambda h: (-h.score, h.kind != "entry", h.seq, h.id))
        return hits[:limit]

    def _by_ids(self, scope: Scope, ids: Sequence[int]) -> list[SummaryRecord]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        with self._read() as c:
            where = f"s.session_id = ? AND s.id IN ({marks})"
            return self._summary_rows(c, where, (scope.session, *ids))

    def _regex_hits(
        self, scope: Scope, pattern: str, limit: int, entries: bool, summaries: bool
    ) -> list[RecallHit]:
        try:
            compiled = compile_linear(pattern)
        except PatternError as exc:
            raise UserError(str(exc)) from None
        hits: list[RecallHit] = []
        if entries:
            for e in self.iter_entries(scope):
                found = tuple(m.start() for m in compiled.finditer(searchable(e.message.text)))
                if found:
                    h = hit(e, None, found)
                    hits.append(
                        RecallHit("entry", e.id, e.seq, e.seq, e.role, h.snippet, float(len(found)))
                    )
        if summaries:
            for s in self.summaries(scope):
                found = tuple(m.start() for m in compiled.finditer(searchable(s.text)))
                if found:
                    hits.append(
                        RecallHit(
                            "summary",
                            s.id,
                            s.first_seq,
                            s.last_seq,
                            "summary",
                            _snippet(s.text, [], found),
                            float(len(found)),
                            s.depth,
                        )
                    )
        hits.sort(key=lambda h: (-h.score, h.kind != "entry", h.seq, h.id))
        return hits[:limit]
