"""Reads of the SQLite ledger that are its own (entries through the cache, tails, search) and
the hooks the shared core needs from SQLite (entry inserts, the trailing full-text index, the
integrity check)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import UserError
from ._common import heads_of, hit, in_order, regex_hits, tail_start, words
from ._core import ENTRY_INSERT, _Core
from ._model import Entry, EntryHead, Scope, SearchHit, log
from ._rows import COLUMNS, entry_from_row
from ._schema import schema_problems
from ._sqlite_base import _Base
from ._sqlite_fts import (
    entry_text,
    forget_session,
    fts_text,
    indexed_texts,
    rebuild,
    search_check,
    upto,
)
from ._text import check_int, storable

_ENTRY_COLS = COLUMNS["entries"]


class _Reads(_Base, _Core):
    """Every read takes a Scope and reads nothing when it does not resolve (LED-2)."""

    # -- reads --------------------------------------------------------------------------------
    def _entries(self, sql: str, args: Sequence[Any]) -> list[Entry]:
        with self._reading():
            rows = self._conn.execute(sql, tuple(args)).fetchall()
        return [entry_from_row(r) for r in rows]

    def entries(
        self, scope: Scope, *, start_seq: int = 0, end_seq: int | None = None
    ) -> list[Entry]:
        """Entries with ``start_seq <= seq <= end_seq`` in order.

        Entries never change, so decoded ones are kept in a bounded cache: an agent that reads
        the same tail every turn decodes only what was appended since (ids come from the
        covering index, bodies are read only for ids not in the cache).
        """
        check_int(start_seq=start_seq, end_seq=end_seq)
        if not self._visible(scope):
            return []
        end = end_seq if end_seq is not None else 2**62
        with self._reading():
            ids = [
                r[0]
                for r in self._conn.execute(
                    "SELECT id FROM entries INDEXED BY entries_budget"
                    " WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                    (scope.session, start_seq, end),
                )
            ]
            found = self._cache.get_many(ids)
            missing = [i for i in ids if i not in found]
            for k in range(0, len(missing), 500):
                chunk = missing[k : k + 500]
                marks = ",".join("?" * len(chunk))
                for e in self._entries(
                    f"SELECT {_ENTRY_COLS} FROM entries WHERE id IN ({marks})", chunk
                ):
                    found[e.id] = e
                    self._cache.put(e)
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
        if not self._visible(scope):
            return []
        with self._reading():
            rows = self._conn.execute(
                "SELECT id, seq, step, role, tokens FROM entries INDEXED BY entries_budget"
                " WHERE session_id = ? AND seq >= ? ORDER BY seq",
                (scope.session, start_seq),
            ).fetchall()
        return heads_of(self.target, scope, rows)

    def tail(self, scope: Scope, *, n: int | None = None, tokens: int | None = None) -> list[Entry]:
        """The newest entries: the last ``n``, or as many whole steps as fit in ``tokens``.

        Cost is proportional to the tail, not the session: token sums walk the covering index
        backwards and stop at the budget; only the chosen bodies are read and decoded.
        """
        if not self._visible(scope):
            return []
        if n is None and tokens is None:
            raise UserError("tail needs n or tokens")
        check_int(n=n, tokens=tokens)
        if n is not None:
            return list(
                reversed(
                    self._entries(
                        f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ?"
                        " ORDER BY seq DESC LIMIT ?",
                        (scope.session, n),
                    )
                )
            )
        assert tokens is not None
        start = self._tail_start(scope, tokens)
        if start is None:
            return []
        return self.entries(scope, start_seq=start)

    def _tail_start(self, scope: Scope, budget: int) -> int | None:
        """Seq of the first entry of the longest run of whole steps that fits ``budget``."""
        with self._reading():
            cur = self._conn.execute(
                "SELECT seq, step, tokens FROM entries INDEXED BY entries_budget"
                " WHERE session_id = ? ORDER BY seq DESC",
                (scope.session,),
            )
            start = tail_start(cur, budget)
            cur.close()
        return start

    def entry(self, scope: Scope, entry_id: int) -> Entry | None:
        check_int(entry_id=entry_id)
        if not self._visible(scope):
            return None
        rows = self._entries(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ? AND id = ?",
            (scope.session, entry_id),
        )
        return rows[0] if rows else None

    def entry_by_call(self, scope: Scope, call_id: str) -> Entry | None:
        if not self._visible(scope) or not storable(call_id):
            return None
        rows = self._entries(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ? AND call_id = ?"
            " ORDER BY seq LIMIT 1",
            (scope.session, call_id),
        )
        return rows[0] if rows else None

    def index_text(self, *, batch: int = 2000) -> int:
        """Bring the full-text index up to date; returns how many entries were indexed.

        Each batch is one transaction with its high-water mark, so a crash mid-way leaves the
        index consistent with ``fts_state`` and the next search resumes where it stopped.
        """
        done = 0
        while True:
            with self.atomic() as c:
                done_upto = upto(c)
                rows = c.execute(
                    "SELECT id, digest, body FROM entries WHERE id > ? ORDER BY id LIMIT ?",
                    (done_upto, batch),
                ).fetchall()
                if not rows:
                    return done
                texts, damaged = indexed_texts(rows, entry_text)
                if damaged:
                    # Search is best effort over what is sound; reading such an entry raises.
                    log.warning("full-text index skipped %d damaged entries; run `comal verify`",
                                damaged)  # fmt: skip
                c.executemany(
                    "INSERT INTO entries_fts (rowid, text) VALUES (?, ?)",
                    texts,
                )
                c.execute("UPDATE fts_state SET upto = ? WHERE name = 'entries'", (rows[-1][0],))
            done += len(rows)

    def search(
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text (FTS5 query syntax) or regex search over a session's messages (LED-5)."""
        check_int(limit=limit)
        if not self._visible(scope):
            return []
        if not regex:
            if not storable(query):
                raise UserError(f"bad full-text query {query!r}: it holds NUL or a lone surrogate")
            self.index_text()
            with self._reading():
                try:
                    ids = [
                        r[0]
                        for r in self._conn.execute(
                            "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?"
                            " AND rowid IN (SELECT id FROM entries WHERE session_id = ?)"
                            " ORDER BY rank LIMIT ?",
                            (query, scope.session, limit),
                        )
                    ]
                except sqlite3.OperationalError as exc:
                    raise UserError(f"bad full-text query {query!r}: {exc}") from exc
            hits = []
            for entry_id in ids:
                e = self.entry(scope, entry_id)
                if e is not None:
                    hits.append(hit(e, words(query)))
            return hits
        return regex_hits(self.iter_entries(scope), query, limit)

    # -- what the shared core needs from SQLite ---------------------------------------------
    def _insert_entries(self, c: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[int]:
        sql = f"{ENTRY_INSERT} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
        return [int(c.execute(sql, r).fetchone()[0]) for r in rows]

    def _index_entries(self, c: sqlite3.Connection, scope: Scope, entries: list[Entry]) -> None:
        """Nothing at append time: the full-text index trails the entries (``index_text``)."""

    def _index_summary(
        self, c: sqlite3.Connection, scope: Scope, record_id: int, text: str
    ) -> None:
        c.execute(
            "INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (record_id, fts_text(text))
        )

    def _session_tables(self, c: sqlite3.Connection) -> list[str]:
        return [
            r[0]
            for r in c.execute(
                "SELECT m.name FROM sqlite_master m, pragma_table_info(m.name) p"
                " WHERE m.type = 'table' AND p.name = 'session_id' ORDER BY m.name"
            )
        ]

    def _forget_text(self, c: sqlite3.Connection, session: str) -> None:
        forget_session(c, session)

    def rebuild_search_index(self) -> None:
        """Drop and rebuild the full-text indexes from the stored text (after ``verify`` with
        ``search=True`` found them damaged); entries are re-indexed by the next search."""
        with self.atomic() as c:
            rebuild(c)

    def _search_check(self) -> list[str]:
        with self._reading() as c:
            return search_check(c)

    def _database_check(self) -> tuple[str, list[str]]:
        """SQLite's full ``integrity_check`` (pages, b-trees, every index against its table)
        and each full-text index's own check."""
        problems: list[str] = []
        with self._reading() as c:
            rows = [str(r[0]) for r in c.execute("PRAGMA integrity_check(100)")]
            if rows != ["ok"]:
                problems += rows
            problems += schema_problems(c)
            for fts in ("entries_fts", "summaries_fts"):
                try:
                    c.execute(f"INSERT INTO {fts} ({fts}) VALUES ('integrity-check')")
                except sqlite3.DatabaseError as exc:
                    problems.append(f"full-text index {fts}: {exc}")
        return ("ok" if not problems else "faults"), problems
