"""What PostgreSQL's ledger checks of itself: ``amcheck`` on its indexes and its search vectors
against the stored text (and rebuilds them)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..errors import LedgerError
from ..messages import load_json, message_from_json, sha256_hex
from ._errors import LedgerReadOnly
from ._model import Scope
from ._postgres_fts import search_vectors


class _PgChecks:
    if TYPE_CHECKING:

        def atomic(self) -> AbstractContextManager[Any]: ...
        def _reading(self) -> AbstractContextManager[Any]: ...
        def _index_text(
            self, c: Any, table: str, scope: Scope, texts: Sequence[tuple[int, str]]
        ) -> None: ...

    def _search_check(self) -> list[str]:
        """Each entry's and summary's stored search vectors against those its text gives now."""
        problems: list[str] = []
        for table, source in (("entries_fts", "entries"), ("summaries_fts", "records")):
            bad = 0
            after = -1
            while True:
                with self._reading() as c:
                    rows = c.execute(
                        f"SELECT id, digest, body FROM {source} WHERE id > %s"
                        + (" AND table_name = 'summary'" if source == "records" else "")
                        + " ORDER BY id LIMIT 500",
                        (after,),
                    ).fetchall()
                    if not rows:
                        break
                    after = rows[-1][0]
                    texts = _texts(rows, source)
                    ids = [i for i, _ in texts]
                    fresh = [(i, k, v) for i, t in texts for k, v in enumerate(search_vectors(t))]
                    ref = "entry_id" if source == "entries" else "record_id"
                    # Both sides through PostgreSQL's own tsvector text form, so they compare.
                    stored = c.execute(
                        f"SELECT {ref}, chunk, tsv::text FROM {table} WHERE {ref} = ANY(%s)"
                        f" ORDER BY {ref}, chunk",
                        (ids,),
                    ).fetchall()
                    expected = c.execute(
                        "SELECT i, k, v::tsvector::text FROM unnest(%s::bigint[], %s::int[],"
                        " %s::text[]) AS x(i, k, v) ORDER BY i, k",
                        ([f[0] for f in fresh], [f[1] for f in fresh], [f[2] for f in fresh]),
                    ).fetchall()
                if stored != expected:
                    bad += len({r[0] for r in set(stored) ^ set(expected)})
            if bad:
                problems.append(
                    f"full-text index {table}: {bad} rows do not match their stored text; "
                    "rebuild it (rebuild_search_index)"
                )
        return problems

    def rebuild_search_index(self) -> None:
        """Recompute every search vector from the stored text, in one transaction."""
        with self.atomic() as c:
            c.execute("DELETE FROM entries_fts")
            c.execute("DELETE FROM summaries_fts")
            for source, table in (("entries", "entries_fts"), ("records", "summaries_fts")):
                rows = c.execute(
                    f"SELECT id, session_id, digest, body FROM {source}"
                    + (" WHERE table_name = 'summary'" if source == "records" else "")
                ).fetchall()
                by_session: dict[str, list[tuple[Any, ...]]] = {}
                for r in rows:
                    by_session.setdefault(r[1], []).append((r[0], r[2], r[3]))
                for session, found in by_session.items():
                    scope = Scope("-", "-", session)  # only the session id is written
                    self._index_text(c, table, scope, _texts(found, source))

    def _database_check(self) -> tuple[str, list[str]]:
        """``amcheck``'s ``bt_index_check`` (with ``heapallindexed``) on every b-tree index of
        the ledger's schema, when the extension is installed and the role may run it; otherwise
        "not checked" and why. PostgreSQL's own page checksums, if enabled, guard the heap."""
        with self._reading() as c:
            found = c.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n"
                " ON n.oid = e.extnamespace WHERE e.extname = 'amcheck'"
            ).fetchone()
            checksums = c.execute("SHOW data_checksums").fetchone()
            indexes = [
                r[0]
                for r in c.execute(
                    "SELECT c.oid::regclass::text FROM pg_class c"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " JOIN pg_am a ON a.oid = c.relam"
                    " WHERE c.relkind = 'i' AND a.amname = 'btree'"
                    " AND n.nspname = current_schema() ORDER BY 1"
                ).fetchall()
            ]
        page_checksums = f"page checksums {'on' if checksums and checksums[0] == 'on' else 'off'}"
        if found is None:
            return (
                "not checked: the amcheck extension is not installed in this database (a "
                f"superuser can run CREATE EXTENSION amcheck); {page_checksums}",
                [],
            )
        call = sql.SQL("SELECT {}.bt_index_check(%s::regclass, true)").format(
            sql.Identifier(found[0])
        )
        problems: list[str] = []
        for index in indexes:
            try:
                with self.atomic() as c:
                    c.execute(call, (index,))
            except LedgerReadOnly:
                return (
                    "not checked: this role may not run amcheck's bt_index_check (GRANT EXECUTE "
                    f"ON FUNCTION bt_index_check(regclass, boolean) to it); {page_checksums}",
                    [],
                )
            except LedgerError as exc:
                problems.append(f"index {index}: {exc}")
        return ("ok" if not problems else "faults"), problems


def _texts(rows: Sequence[tuple[Any, ...]], source: str) -> list[tuple[int, str]]:
    """(id, text) of sound (id, digest, body) rows; damaged ones are verify's to report."""
    out: list[tuple[int, str]] = []
    for row_id, digest, body in rows:
        if sha256_hex(body) != digest:
            continue
        try:
            if source == "entries":
                text = message_from_json(body).text
            else:
                value = load_json(body).get("text")
                text = value if isinstance(value, str) else ""
        except Exception:  # does not decode: verify reports it
            continue
        out.append((int(row_id), text))
    return out
