"""Reads of the SQLite ledger: entries, tails, search, checkpoints and records."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from ..errors import UserError
from ..messages import (
    Message,
    canonical_json,
    message_from_json,
    message_to_json,
    sha256_hex,
)
from ..tokens import count_message
from ._common import (
    checkpoint_from_row,
    entry_from_row,
    hit,
    record_from_row,
    regex_hits,
    request_from_row,
    tail_start,
    words,
)
from ._model import (
    CheckpointRecord,
    Entry,
    EntryHead,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SearchHit,
)
from ._sqlite_base import _Base, _now

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_ENTRY_COLS = (
    "id, session_id, seq, step, role, tokens, size, created_at, digest, output_digest, body"
)


class _Reads(_Base):
    """Every read takes a Scope and reads nothing when it does not resolve (LED-2)."""

    # -- reads --------------------------------------------------------------------------------
    def _entries(self, sql: str, args: Sequence[Any]) -> list[Entry]:
        with self._lock:
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
        if not self._visible(scope):
            return []
        end = end_seq if end_seq is not None else 2**62
        with self._lock:
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
        return [found[i] for i in ids]

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
        if not self._visible(scope):
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, seq, step, role, tokens FROM entries INDEXED BY entries_budget"
                " WHERE session_id = ? AND seq >= ? ORDER BY seq",
                (scope.session, start_seq),
            ).fetchall()
        return [EntryHead(*r) for r in rows]

    def tail(self, scope: Scope, *, n: int | None = None, tokens: int | None = None) -> list[Entry]:
        """The newest entries: the last ``n``, or as many whole steps as fit in ``tokens``.

        Cost is proportional to the tail, not the session: token sums walk the covering index
        backwards and stop at the budget; only the chosen bodies are read and decoded.
        """
        if not self._visible(scope):
            return []
        if n is None and tokens is None:
            raise UserError("tail needs n or tokens")
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
        with self._lock:
            cur = self._conn.execute(
                "SELECT seq, step, tokens FROM entries INDEXED BY entries_budget"
                " WHERE session_id = ? ORDER BY seq DESC",
                (scope.session,),
            )
            start = tail_start(cur, budget)
            cur.close()
        return start

    def entry(self, scope: Scope, entry_id: int) -> Entry | None:
        if not self._visible(scope):
            return None
        rows = self._entries(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE session_id = ? AND id = ?",
            (scope.session, entry_id),
        )
        return rows[0] if rows else None

    def entry_by_call(self, scope: Scope, call_id: str) -> Entry | None:
        if not self._visible(scope):
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
                upto = c.execute("SELECT upto FROM fts_state WHERE name = 'entries'").fetchone()[0]
                rows = c.execute(
                    "SELECT id, body FROM entries WHERE id > ? ORDER BY id LIMIT ?", (upto, batch)
                ).fetchall()
                if not rows:
                    return done
                c.executemany(
                    "INSERT INTO entries_fts (rowid, text) VALUES (?, ?)",
                    [(i, _fts_text(t)) for i, body in rows if (t := message_from_json(body).text)],
                )
                c.execute("UPDATE fts_state SET upto = ? WHERE name = 'entries'", (rows[-1][0],))
            done += len(rows)

    def search(
        self, scope: Scope, query: str, *, regex: bool = False, limit: int = 50
    ) -> list[SearchHit]:
        """Full-text (FTS5 query syntax) or regex search over a session's messages (LED-5)."""
        if not self._visible(scope):
            return []
        if not regex:
            self.index_text()
            with self._lock:
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

    def requests(self, scope: Scope) -> list[RequestRecord]:
        if not self._visible(scope):
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, session_id, entry_id, model, protocol, new_input, cache_read,"
                " cache_write, output, reasoning, meta FROM requests WHERE session_id = ?"
                " ORDER BY id",
                (scope.session,),
            ).fetchall()
        return [request_from_row(r) for r in rows]

    # -- checkpoints, receipts, summaries, events ---------------------------------------------
    def add_checkpoint(
        self,
        scope: Scope,
        message: Message,
        *,
        first_seq: int,
        last_seq: int,
        meta: dict[str, Any] | None = None,
    ) -> CheckpointRecord:
        body = message_to_json(message)
        tokens = count_message(self.counter, message)
        created = _now()
        with self.atomic() as c:
            row = self._session_row(scope)
            if row is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            if not 0 <= first_seq <= last_seq < int(row[0]):
                raise UserError(
                    f"checkpoint range {first_seq}..{last_seq} is outside the session's "
                    f"entries 0..{int(row[0]) - 1}"
                )
            cur = c.execute(
                "INSERT INTO checkpoints (session_id, first_seq, last_seq, tokens, created_at,"
                " digest, body, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    scope.session,
                    first_seq,
                    last_seq,
                    tokens,
                    created,
                    sha256_hex(body),
                    body,
                    canonical_json(meta or {}),
                ),
            )
        return CheckpointRecord(
            int(cur.lastrowid or 0),
            scope.session,
            first_seq,
            last_seq,
            tokens,
            sha256_hex(body),
            created,
            message,
            meta or {},
        )

    def checkpoints(self, scope: Scope) -> list[CheckpointRecord]:
        if not self._visible(scope):
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, session_id, first_seq, last_seq, tokens, digest, created_at, body,"
                " meta FROM checkpoints WHERE session_id = ? ORDER BY last_seq, id",
                (scope.session,),
            ).fetchall()
        return [checkpoint_from_row(r) for r in rows]

    def latest_checkpoint(self, scope: Scope) -> CheckpointRecord | None:
        if not self._visible(scope):
            return None
        with self._lock:
            r = self._conn.execute(
                "SELECT id, session_id, first_seq, last_seq, tokens, digest, created_at, body,"
                " meta FROM checkpoints WHERE session_id = ? ORDER BY last_seq DESC, id DESC"
                " LIMIT 1",
                (scope.session,),
            ).fetchone()
        if r is None:
            return None
        return checkpoint_from_row(r)

    def add_record(
        self,
        scope: Scope,
        table: RecordTable,
        kind: str,
        body: dict[str, Any],
    ) -> Record:
        text = canonical_json(body)
        digest = sha256_hex(text)
        created = _now()
        with self.atomic() as c:
            if self._session_row(scope) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            cur = c.execute(
                "INSERT INTO records (session_id, table_name, kind, created_at, digest, body)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (scope.session, table, kind, created, digest, text),
            )
            rid = int(cur.lastrowid or 0)
            if table == "summary" and isinstance(body.get("text"), str):
                c.execute(
                    "INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (rid, body["text"])
                )
        return Record(rid, scope.session, kind, created, digest, body)

    def record(self, scope: Scope, table: RecordTable, record_id: int) -> Record | None:
        """One record of this session by id (None if it is not this session's)."""
        if not self._visible(scope):
            return None
        with self._lock:
            r = self._conn.execute(
                "SELECT id, session_id, kind, created_at, digest, body FROM records"
                " WHERE id = ? AND session_id = ? AND table_name = ?",
                (record_id, scope.session, table),
            ).fetchone()
        return None if r is None else record_from_row(r)

    def records(
        self, scope: Scope, table: RecordTable, *, kinds: Sequence[str] | None = None
    ) -> list[Record]:
        """A session's records of ``table`` in order; ``kinds`` narrows them in the query, so a
        caller looking for a few small events does not decode stored outputs."""
        if kinds is not None and not kinds:
            return []
        if not self._visible(scope):
            return []
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, session_id, kind, created_at, digest, body FROM records"
                " WHERE session_id = ? AND table_name = ?"
                + ("" if kinds is None else " AND kind IN (" + ",".join(["?"] * len(kinds)) + ")")
                + " ORDER BY id",
                (scope.session, table, *(kinds or ())),
            ).fetchall()
        return [record_from_row(r) for r in rows]


def _fts_text(text: str) -> str:
    # SQLite needs valid UTF-8; a lone surrogate (from surrogateescape-decoded output) becomes
    # U+FFFD in the index only. The stored body keeps it exactly.
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")
