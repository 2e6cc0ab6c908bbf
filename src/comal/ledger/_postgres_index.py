"""PostgreSQL's search vectors: summaries and memories with their rows, entries by a queue.

Building an entry's ``tsvector`` literals is most of a PostgreSQL append's cost (~1 ms of client
CPU for a step of ~10 KB of text, then the GIN index's inserts on the server), so an append only
queues its entries' ids in ``fts_pending``, inside its own transaction, and a search first
indexes what is queued for the sessions it reads (:func:`catch_up`).

A queue rather than SQLite's high-water mark (``fts_state``): concurrent writers take identity
ids in one order and commit in another, so "everything up to id N is indexed" can skip an entry
forever. A queued id is indexed exactly once: the catch-up deletes it from the queue and writes
its vectors in one transaction, and a second catch-up that reaches the same row waits for the
first and then finds it gone. A crash mid-way rolls both back, leaving the id queued.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..messages import load_json, message_from_json, sha256_hex
from ._bodies import unpack
from ._db import Db
from ._dialect import insert_many
from ._postgres_fts import search_vectors

__all__ = [
    "SOURCES",
    "catch_up",
    "insert_vectors",
    "pending_among",
    "queue_entries",
    "sound_texts",
]

# Each full-text table: the table its rows index, and the column naming the row.
SOURCES = {
    "entries_fts": ("entries", "entry_id"),
    "summaries_fts": ("records", "record_id"),
    "summaries_text_fts": ("summaries", "summary_id"),
    "memories_fts": ("memories", "memory_id"),
}

# Entries indexed per transaction: a search's catch-up holds no more locks, nor rebuilds more
# vectors in one go, than this.
BATCH = 500


def insert_vectors(db: Db, table: str, session: str, texts: Iterable[tuple[int, str]]) -> None:
    rows = [
        (ref, k, session, vector)
        for ref, text in texts
        for k, vector in enumerate(search_vectors(text))
    ]
    insert_many(
        db,
        f"INSERT INTO {table} ({SOURCES[table][1]}, chunk, session_id, tsv) VALUES {{}}",
        "(?, ?, ?, ?::tsvector)",
        rows,
    )


def queue_entries(db: Db, session: str, texts: Iterable[tuple[int, str]]) -> None:
    """Queue the appended entries ``texts`` (id, text) for the next search of ``session``."""
    insert_many(
        db,
        "INSERT INTO fts_pending (entry_id, session_id) VALUES {}",
        "(?, ?)",
        [(ref, session) for ref, _ in texts],
    )


def catch_up(db: Db, sessions: str, args: Sequence[Any]) -> int:
    """Index the queued entries of the sessions ``sessions`` selects (an SQL condition on
    ``session_id`` with its ``args``), a batch a transaction; how many were taken.

    Bounded: only what was queued when it started, so appends that go on meanwhile cannot keep
    it going."""
    with db.reading() as c:
        row = c.execute(
            f"SELECT max(entry_id) FROM fts_pending WHERE {sessions}", tuple(args)
        ).fetchone()
    if row is None or row[0] is None:
        return 0
    upto, done = int(row[0]), 0
    while True:
        with db.atomic() as c:
            # FOR UPDATE without SKIP LOCKED: a search must not go ahead of entries another
            # catch-up is still indexing, so it waits for them, then finds them gone.
            taken = c.execute(
                "DELETE FROM fts_pending WHERE entry_id IN (SELECT entry_id FROM fts_pending"
                f" WHERE {sessions} AND entry_id <= ? ORDER BY entry_id LIMIT {BATCH}"
                " FOR UPDATE) RETURNING entry_id",
                (*args, upto),
            ).fetchall()
            if not taken:
                return done
            rows = c.execute(
                "SELECT id, session_id, digest, body FROM entries WHERE id = ANY(?)",
                ([int(r[0]) for r in taken],),
            ).fetchall()
            by_session: dict[str, list[tuple[Any, ...]]] = {}
            for r in rows:
                by_session.setdefault(r[1], []).append((r[0], r[2], r[3]))
            for session, found in by_session.items():
                insert_vectors(c, "entries_fts", session, sound_texts(found, "entries_fts"))
        done += len(taken)
        if len(taken) < BATCH:
            return done


def pending_among(db: Db, ids: Sequence[int]) -> set[int]:
    """Which of the entries ``ids`` are queued, not yet indexed."""
    rows = db.execute("SELECT entry_id FROM fts_pending WHERE entry_id = ANY(?)", (list(ids),))
    return {int(r[0]) for r in rows.fetchall()}


def sound_texts(rows: Sequence[tuple[Any, ...]], table: str) -> list[tuple[int, str]]:
    """(id, text) of sound (id, digest, body) rows; damaged ones are verify's to report."""
    out: list[tuple[int, str]] = []
    for row_id, digest, stored in rows:
        body = unpack(stored)
        if not isinstance(body, str) or sha256_hex(body) != digest:
            continue
        try:
            if table == "entries_fts":
                text = message_from_json(body).text
            else:
                value = load_json(body).get("text")
                text = value if isinstance(value, str) else ""
        except Exception:  # does not decode: verify reports it
            continue
        out.append((int(row_id), text))
    return out
