"""Deletion (the only one there is, tombstoned), and what ``verify`` walks and checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..messages import canonical_json, sha256_hex
from . import _ledger_head as ledger_head
from ._backfill import SPEND_MINUTES, SPEND_RUNS
from ._bodies import unpack
from ._db import Db
from ._errors import SessionHasChildren
from ._model import Deletion, LedgerEvent, Scope, log
from ._rollback import remember
from ._rows import COLUMNS, SEALED, deletion_from_row, event_from_row, seal_row, whole
from ._savings import saving_mismatches
from ._store import StoreBase, now
from ._text import check_text, storable

# Tables the core owns rows of; a session's rows in any other table with a ``session_id``
# column (a later migration's) are deleted with it too.
OWN_TABLES = frozenset(
    {"sessions", "entries", "requests", "checkpoints", "records", "deletions", "fts_state"}
    | {"entries_fts", "summaries_fts", "schema_migrations", "spend_runs", "spend_minutes"}
    | {"ledger_meta", "fts_pending"}
)


class Admin(StoreBase):
    # -- deletion ---------------------------------------------------------------------------------
    def delete_session(
        self, scope: Scope, *, by: str | None = None, children: bool = False
    ) -> Deletion:
        """Remove every row of the session in one transaction and leave a tombstone.

        Gone: its entries (and their full-text rows), requests, checkpoints, records (receipts,
        summaries, events, preparations) and its rows in any later table keyed by
        ``session_id``. Kept: a :class:`Deletion` in ``deletions`` naming the session, ``by``
        (who asked), when, how many rows of each table went and a digest of their digests and
        seals, so the deletion is recorded and ``verify`` stays clean. A session with child
        sessions is refused (:class:`SessionHasChildren`) unless ``children=True``, which
        deletes its descendants first, each with its own tombstone. This is the only deletion
        the ledger has; compaction never deletes (LED-1).
        """
        check_text(deleted_by=by)
        with self.atomic() as c:
            self._require(scope, lock=True)
            return self._delete(c, scope.session, by, children)

    def _delete(self, c: Db, sid: str, by: str | None, children: bool) -> Deletion:
        kids = [
            r[0]
            for r in c.execute(
                "SELECT id FROM sessions WHERE parent = ? ORDER BY created_at, id", (sid,)
            ).fetchall()
        ]
        if kids and not children:
            raise SessionHasChildren(
                f"session {sid} has {len(kids)} child session(s) ({', '.join(kids[:3])}"
                f"{', ...' if len(kids) > 3 else ''}); delete them first, or pass children=True "
                "(`comal rm` asks before it does)"
            )
        for kid in kids:
            self._delete(c, kid, by, True)
        info = c.execute(
            "SELECT tenant, agent, parent, title, created_at, token_total FROM sessions"
            " WHERE id = ?",
            (sid,),
        ).fetchone()
        removed: dict[str, list[list[Any]]] = {}
        for table, cols in (
            ("entries", "seal, digest"),
            ("requests", "seal"),
            ("checkpoints", "seal, digest"),
            ("records", "seal, digest"),
        ):
            rows = c.execute(
                (f"SELECT {cols} FROM {table} WHERE session_id = ? ORDER BY id"), (sid,)
            ).fetchall()
            removed[table] = [list(r) for r in rows]
        counts = {table: len(rows) for table, rows in removed.items()}
        # Rows keyed by something other than session_id that reference the session's rows
        # (the summary DAG's edges) go first, and the summaries after what references them.
        cur = c.execute(
            "DELETE FROM summary_children WHERE parent_id IN"
            " (SELECT id FROM summaries WHERE session_id = ?)",
            (sid,),
        )
        counts["summary_children"] = max(cur.rowcount, 0)
        extras = [t for t in self._dialect.session_tables(c) if t not in OWN_TABLES]
        for extra in sorted(extras, key=lambda t: t == "summaries"):
            cur = c.execute(f"DELETE FROM {extra} WHERE session_id = ?", (sid,))
            counts[extra] = max(cur.rowcount, 0)
        self._dialect.forget_text(c, sid)
        self._remove_spend(c, sid)
        for table in ("requests", "records", "checkpoints", "entries"):
            c.execute((f"DELETE FROM {table} WHERE session_id = ?"), (sid,))
        c.execute(("DELETE FROM sessions WHERE id = ?"), (sid,))
        ledger_head.advance(c, self._sealer, self._ledger_id, removed=[sid])
        tenant, agent, parent, title, created_at, tokens = info
        tokens = tokens if whole(tokens) else 0  # a damaged counter must not block deletion
        sealed: tuple[Any, ...] = (sid, tenant, agent, parent, title, created_at, now(), by)
        sealed += (counts["entries"],)
        sealed += (int(tokens), canonical_json(counts), sha256_hex(canonical_json(removed)))
        (did,) = self._dialect.new_ids(c, "deletions", 1)
        c.execute(
            f"INSERT INTO deletions (id, {', '.join(SEALED['deletions'])}, seal)"
            f"{self._dialect.overriding} VALUES ({', '.join('?' * (len(sealed) + 2))})",
            (did, *sealed, seal_row(self._sealer, "deletions", sealed, did)),
        )
        log.info("ledger: session %s deleted (%d entries)", sid, counts["entries"])
        return Deletion(
            did,
            sid,
            tenant,
            agent,
            parent,
            title,
            created_at,
            sealed[6],
            by,
            counts["entries"],
            int(tokens),
            counts,
            sealed[11],
        )

    def _remove_spend(self, c: Db, sid: str) -> None:
        """A deleted session's requests leave the running totals, as they leave the ledger."""
        for table, key, column in (
            ("spend_runs", "run", "run"),
            ("spend_minutes", "minute", "substr(spent_at, 1, 16)"),
        ):
            rows = c.execute(
                f"SELECT tenant, {column}, sum(tokens) FROM requests WHERE session_id = ?"
                f" AND {column} IS NOT NULL AND tenant IS NOT NULL GROUP BY tenant, {column}",
                (sid,),
            ).fetchall()
            for tenant, value, tokens in rows:
                c.execute(
                    f"UPDATE {table} SET tokens = tokens - ? WHERE tenant = ? AND {key} = ?",
                    (int(tokens), tenant, value),
                )
            c.execute(f"DELETE FROM {table} WHERE tokens = 0")

    def _spend_mismatches(self) -> list[tuple[str, str, str, int, int]]:
        """(table, tenant, key, expected, stored) where a running total disagrees with the
        requests it sums (verify)."""
        found: list[tuple[str, str, str, int, int]] = []
        with self._reading() as c:
            for table, key, expected in (
                ("spend_runs", "run", SPEND_RUNS),
                ("spend_minutes", "minute", SPEND_MINUTES),
            ):
                want = {(r[0], r[1]): int(r[2]) for r in c.execute(expected).fetchall()}
                have = {
                    (r[0], r[1]): r[2] if whole(r[2]) else -1
                    for r in c.execute(f"SELECT tenant, {key}, tokens FROM {table}").fetchall()
                }
                for k in sorted(set(want) | set(have), key=repr):
                    if want.get(k, 0) != have.get(k, 0):
                        found.append((table, str(k[0]), str(k[1]), want.get(k, 0), have.get(k, 0)))
        return found

    def _saving_mismatches(self) -> list[tuple[str, int, float | None, int, float | None]]:
        """Sessions whose running request totals disagree with their requests (verify)."""
        with self._reading() as c:
            return saving_mismatches(c)

    def deletions(self, *, tenant: str | None = None) -> list[Deletion]:
        """The tombstones of deleted sessions, oldest first (operator listing)."""
        where, args = "1 = 1", []
        if tenant is not None:
            if not storable(tenant):
                return []
            where, args = "tenant = ?", [tenant]
        return [
            deletion_from_row(self._sealer, r) for r in self._select("deletions", where, args, "id")
        ]

    # -- the ledger as a whole --------------------------------------------------------------------
    def ledger_events(self) -> list[LedgerEvent]:
        """What happened to the ledger as a whole, oldest first (a restore accepted)."""
        rows = self._select("ledger_events", "1 = 1", (), "id")
        return [event_from_row(self._sealer, r) for r in rows]

    def accept_restore(self, *, by: str | None = None) -> LedgerEvent | None:
        """Accept the ledger as it is now where it is older than this machine last saw it (a
        restore made on purpose; open it with ``strict=False``): a ``restore_accepted`` event
        naming what was found, what had been seen and ``by``, and what is seen from now on is
        this. None when there was nothing to accept."""
        if self._rolled_back is None:
            return None
        check_text(accepted_by=by)
        found, seen = self._rolled_back
        body = {"found": found.as_dict(), "seen": seen.as_dict(), "by": by,
                "place": self._keying.place}  # fmt: skip
        sealed = ("restore_accepted", now(), canonical_json(body))
        with self.atomic() as c:
            (eid,) = self._dialect.new_ids(c, "ledger_events", 1)
            c.execute(
                "INSERT INTO ledger_events (id, kind, created_at, body, seal)"
                f"{self._dialect.overriding} VALUES (?, ?, ?, ?, ?)",
                (eid, *sealed, seal_row(self._sealer, "ledger_events", sealed, eid)),
            )
        path = self._seen_path()
        if path is not None:
            remember(path, self._observe(), str(self._keying.place), replace=True)
        self._rolled_back = None
        self._opening_faults = [f for f in self._opening_faults if f.kind != "rolled-back"]
        log.info("ledger: a restore was accepted (%s)", canonical_json(body))
        return LedgerEvent(eid, sealed[0], sealed[1], body)

    def _ledger_head_row(self) -> tuple[Any, ...] | None:
        """The raw ``(generation, sessions, digest, seal)`` of the ledger's head (verify)."""
        with self._reading() as c:
            row: tuple[Any, ...] | None = c.execute(
                "SELECT generation, sessions, digest, seal FROM ledger_head WHERE name = ?",
                (ledger_head.NAME,),
            ).fetchone()
        return row

    # -- raw access for verify ------------------------------------------------------------------
    def _raw_entries(self) -> Iterator[tuple[Any, ...]]:
        """Every entry row (``COLUMNS["entries"]``) by session and seq."""
        return self._raw("entries", ("session_id", "seq"), lambda r: (r[0], r[1]))

    def _raw_table(self, table: str) -> Iterator[tuple[Any, ...]]:
        """Every row of ``table`` (``COLUMNS[table]``) by id."""
        at = 0 if table == "sessions" else len(SEALED[table]) + 1  # where the id is
        return self._raw(table, ("id",), lambda r: (r[at],))

    def _raw(
        self, table: str, key: tuple[str, ...], key_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    ) -> Iterator[tuple[Any, ...]]:
        """Keyset pages of ``table`` in ``key`` order, each read in its own short read.

        Read leniently: text that is not valid UTF-8 (a damaged row) comes back with its bad
        bytes as surrogates, so its digest or seal fails and verify names the row, instead of
        the whole walk stopping there.
        """
        cols, marks = ", ".join(key), ", ".join("?" * len(key))
        after: tuple[Any, ...] = ("", -1) if len(key) == 2 else ("" if table == "sessions" else -1,)
        while True:
            with self._reading() as c, self._lenient():
                rows = c.execute(
                    f"SELECT {COLUMNS[table]} FROM {table} WHERE ({cols}) > ({marks})"
                    f" ORDER BY {cols} LIMIT 500",
                    after,
                ).fetchall()
            yield from rows
            if len(rows) < 500:
                return
            after = key_of(rows[-1])

    def _raw_request_refs(self) -> list[tuple[Any, ...]]:
        """Requests whose entry is missing or another session's: (id, session, entry_id)."""
        with self._reading() as c:
            rows: list[tuple[Any, ...]] = c.execute(
                "SELECT r.id, r.session_id, r.entry_id FROM requests r"
                " LEFT JOIN entries e ON e.id = r.entry_id WHERE r.entry_id IS NOT NULL"
                " AND (e.id IS NULL OR e.session_id <> r.session_id) ORDER BY r.id"
            ).fetchall()
        return rows

    def _raw_rows(self) -> Iterator[tuple[Any, ...]]:
        """(session, seq, step, role, digest, output_digest, body) of every entry, as stored."""
        for r in self._raw_entries():
            yield (*r[:4], r[8], r[9], unpack(r[13]))

    def _database_check(self) -> tuple[str, list[str]]:
        return self._dialect.database_check(self._db)

    def _search_check(self) -> list[str]:
        return self._dialect.search_check(self._db)

    def rebuild_search_index(self) -> None:
        """Rebuild the full-text indexes from the stored text (after ``verify`` with
        ``search=True`` found them damaged), in one transaction."""
        with self.atomic() as c:
            self._dialect.rebuild_search_index(c)
