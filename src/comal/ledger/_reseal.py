"""The Python half of migration ``0011_sealed_identity``: every row's seal comes to cover its id.

Before it, a row's seal covered its columns but not its id, so two rows could trade ids (or
contents) and still match their seals: an entry read by id was then another one. This reseals
every row of every table with an id (sessions already sealed theirs) with the id inside
(``_rows.sealed_values``), rechains each session's entries over their new seals, reseals each
session's head, and makes the ledger's own head (``_ledger_head``) over the sessions stored.

It needs the ledger's secret: without it (or with a key check that does not match) the migration
is a coded error and nothing is written, never a ledger left half resealed or skipped. Like
``0006_keyed_chain`` it seals in no damage: a row whose old seal does not match keeps it (a
``verify`` fault, as before), an entry whose link to the one before it was broken keeps its link
and seal, and a session whose head did not match its chain keeps its head.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import _ledger_head
from ._rows import HEAD, SEALED
from ._seal import Keying, Sealer, find_sealer

if TYPE_CHECKING:
    from ._db import Db

_BATCH = 2000
# The tables whose rows are resealed as they are (the entries are rechained apart).
_TABLES = (
    "requests", "checkpoints", "records", "deletions", "summaries", "memory_flushes", "memories",
)  # fmt: skip


def migration_sealer(db: Db, keying: Keying, doing: str) -> Sealer:
    """The sealer a migration writes seals with: the key made by this open's migrations, or the
    ledger's own; a coded error when it has none that matches."""
    if keying.made is not None:
        return Sealer(*keying.made, None, keying.target)
    meta = dict(db.execute("SELECT name, value FROM ledger_meta").fetchall())
    sealer = find_sealer(keying, meta)
    if not sealer.checks:
        raise sealer.refusal(doing)
    return sealer


def _pages(db: Db, table: str, columns: str) -> Iterator[list[Any]]:
    after = -1
    while True:
        rows = db.execute(
            f"SELECT id, {columns} FROM {table} WHERE id > ? ORDER BY id LIMIT {_BATCH}", (after,)
        ).fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _matches(sealer: Sealer, table: str, values: Any, stored: Any) -> bool:
    try:
        return sealer.matches(table, values, stored)
    except (TypeError, ValueError):  # a column holding bytes: damage, kept visible
        return False


def seal_identity(db: Db, keying: Keying) -> None:
    sealer = migration_sealer(
        db, keying, "reseal its rows with their ids (migration 0011_sealed_identity)"
    )
    (ledger_id,) = db.execute("SELECT value FROM ledger_meta WHERE name = 'id'").fetchone()
    for table in _TABLES:
        for rows in _pages(db, table, ", ".join((*SEALED[table], "seal"))):
            updates = [
                (sealer.seal(table, (*r[1:-1], r[0])), r[0])
                for r in rows
                if _matches(sealer, table, r[1:-1], r[-1])
            ]
            db.executemany(f"UPDATE {table} SET seal = ? WHERE id = ?", updates)
    heads = _rechain(db, sealer)
    for rows in _pages_of_sessions(db):
        heads_now: list[tuple[Any, ...]] = []
        for sid, next_seq, head, head_seal in rows:
            old_last, new_last = heads.get(sid, (None, None))
            if head == old_last and _matches(sealer, HEAD, (sid, next_seq, head), head_seal):
                heads_now.append((new_last, sealer.seal(HEAD, (sid, next_seq, new_last)), sid))
        db.executemany("UPDATE sessions SET head = ?, head_seal = ? WHERE id = ?", heads_now)
    _ledger_head.start(db, sealer, ledger_id)


def _pages_of_sessions(db: Db) -> Iterator[list[Any]]:
    after = ""
    while True:
        rows = db.execute(
            "SELECT id, next_seq, head, head_seal FROM sessions WHERE id > ? ORDER BY id"
            f" LIMIT {_BATCH}",
            (after,),
        ).fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _rechain(db: Db, sealer: Sealer) -> dict[str, tuple[Any, Any]]:
    """Reseal every session's entries in seq order over their new seals; each session's last
    (old, new) seal. An entry is resealed only when its old seal matches and its link is the
    old seal of the entry before it: a broken link stays broken."""
    columns = ", ".join(SEALED["entries"])
    heads: dict[str, tuple[Any, Any]] = {}
    after: tuple[str, int] = ("", -1)
    while True:
        rows = db.execute(
            f"SELECT id, {columns}, seal FROM entries WHERE (session_id, seq) > (?, ?)"
            f" ORDER BY session_id, seq LIMIT {_BATCH}",
            after,
        ).fetchall()
        updates = []
        for r in rows:
            rid, values, stored = r[0], r[1:-1], r[-1]
            old_prev, new_prev = heads.get(r[1], (None, None))
            if values[-1] == old_prev and _matches(sealer, "entries", values, stored):
                seal = sealer.seal("entries", (*values[:-1], new_prev, rid))
                updates.append((new_prev, seal, rid))
            else:
                seal = stored
            heads[r[1]] = (stored, seal)
        db.executemany("UPDATE entries SET prev_seal = ?, seal = ? WHERE id = ?", updates)
        if len(rows) < _BATCH:
            return heads
        after = (rows[-1][1], rows[-1][2])
