"""The PostgreSQL hooks of the summary store (statements and rules are in :mod:`._summaries`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._coordination import CoordinationRows
from ._model import Scope
from ._postgres_fts import fts_query, search_vectors
from ._summaries import SummaryStore
from ._text import check_text, storable

__all__ = ["PgSummaries"]


class PgSummaries(SummaryStore, CoordinationRows):
    _placeholder = "%s"

    if TYPE_CHECKING:

        def _reading(self) -> Any: ...  # provided by _PgBase

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._reading() as c:
            yield c

    def _lock_session(self, c: Any, scope: Scope) -> bool:
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return False
        # FOR UPDATE: summary writes and lease changes of one session take turns across
        # processes, as appends do.
        row = c.execute(
            "SELECT 1 FROM sessions WHERE id = %s AND tenant = %s AND agent = %s FOR UPDATE",
            (scope.session, scope.tenant, scope.agent),
        ).fetchone()
        return row is not None

    def _insert_id(self, c: Any, sql: str, args: Sequence[Any]) -> int:
        row = c.execute(self._q(sql) + " RETURNING id", tuple(args)).fetchone()
        return int(row[0])

    def _index_dag_summary(self, c: Any, scope: Scope, summary_id: int, text: str) -> None:
        check_text(summary=text)
        for k, vector in enumerate(search_vectors(text)):
            c.execute(
                "INSERT INTO summaries_text_fts (summary_id, chunk, session_id, tsv)"
                " VALUES (%s, %s, %s, %s::tsvector)",
                (summary_id, k, scope.session, vector),
            )

    def _ranked(self, sql: str, scope: Scope, match: str, limit: int) -> list[tuple[int, float]]:
        tsquery = fts_query(match)
        if tsquery is None:
            return []
        with self._read() as c:
            rows = c.execute(sql, {"s": scope.session, "q": tsquery, "n": limit}).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def _fts_summaries(self, scope: Scope, match: str, limit: int) -> list[tuple[int, float]]:
        return self._ranked(
            "SELECT summary_id, max(ts_rank(tsv, %(q)s::tsquery)) AS r FROM summaries_text_fts"
            " WHERE session_id = %(s)s AND tsv @@ %(q)s::tsquery GROUP BY summary_id"
            " ORDER BY r DESC, summary_id LIMIT %(n)s",
            scope,
            match,
            limit,
        )

    def _fts_entries(self, scope: Scope, match: str, limit: int) -> list[tuple[int, float]]:
        return self._ranked(
            "SELECT entry_id, max(ts_rank(tsv, %(q)s::tsquery)) AS r FROM entries_fts"
            " WHERE session_id = %(s)s AND tsv @@ %(q)s::tsquery GROUP BY entry_id"
            " ORDER BY r DESC, entry_id LIMIT %(n)s",
            scope,
            match,
            limit,
        )
