"""The Python halves of migrations ``0003_ledger_hardening`` and ``0006_keyed_chain``.

``harden`` fills what rows stored before 0003 lack: each session's ``last_step``, the request
columns the per-turn aggregates read (``tenant``, ``tokens``, ``run``, ``spent_at``,
``prompt_last_seq``, derived from each request's meta exactly as new appends derive them), the
running spend totals, and every row's seal, by the formula of its day: sha256 of the row's
canonical JSON, unkeyed. A row is sealed as it is found: damage done before it is sealed in.

``key_and_chain`` makes the ledger tamper-evident once: it gives the ledger an id and a secret
(``_seal.new_key``), reseals every row under the secret and chains each session's entries
(``prev_seal``, the session's ``head`` and ``head_seal``). A row whose old seal does not match
keeps it, so damage done before the migration stays a ``verify`` fault rather than being
sealed in; bodies keep their own digests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..messages import canonical_json, load_json, sha256_hex
from ._rows import HEAD, SEALED, billed_tokens, request_facts
from ._seal import Keying, Sealer, key_check, new_key

if TYPE_CHECKING:
    from ._db import Db

_BATCH = 2000
# Columns each table was sealed over before the chain: the entries lacked prev_seal.
_UNCHAINED = {**SEALED, "entries": SEALED["entries"][:-1]}

# The running spend totals, from the requests as they are (also what verify compares with).
SPEND_RUNS = (
    "SELECT tenant, run, sum(tokens) FROM requests WHERE run IS NOT NULL AND tenant IS NOT NULL"
    " GROUP BY tenant, run"
)
SPEND_MINUTES = (
    "SELECT tenant, substr(spent_at, 1, 16), sum(tokens) FROM requests"
    " WHERE spent_at IS NOT NULL AND tenant IS NOT NULL GROUP BY tenant, substr(spent_at, 1, 16)"
)


def _unkeyed(table: str, values: Any) -> str:
    return sha256_hex(canonical_json([table, *values]))


def _pages(db: Db, table: str, columns: str) -> Iterator[list[Any]]:
    after: Any = "" if table == "sessions" else -1
    while True:
        rows = db.execute(
            f"SELECT id, {columns} FROM {table} WHERE id > ? ORDER BY id LIMIT {_BATCH}", (after,)
        ).fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def harden(db: Db, _keying: Any) -> None:
    db.execute(
        "UPDATE sessions SET last_step = (SELECT max(step) FROM entries"
        " WHERE entries.session_id = sessions.id)"
    )
    db.execute(
        "UPDATE requests SET tenant = (SELECT tenant FROM sessions"
        " WHERE sessions.id = requests.session_id)"
    )
    for rows in _pages(db, "requests", "new_input, cache_read, cache_write, output, meta"):
        updates = []
        for rid, new_input, cache_read, cache_write, output, meta in rows:
            try:
                facts = request_facts(load_json(meta))
            except Exception:  # a meta that does not decode: its facts are unknown; verify says so
                facts = (None, None, None)
            updates.append((billed_tokens(new_input, cache_read, cache_write, output), *facts, rid))
        db.executemany(
            "UPDATE requests SET tokens = ?, run = ?, spent_at = ?, prompt_last_seq = ?"
            " WHERE id = ?",
            updates,
        )
    db.execute(f"INSERT INTO spend_runs (tenant, run, tokens) {SPEND_RUNS}")
    db.execute(f"INSERT INTO spend_minutes (tenant, minute, tokens) {SPEND_MINUTES}")
    for table in ("sessions", "entries", "requests", "checkpoints", "records"):
        for rows in _pages(db, table, ", ".join(_UNCHAINED[table])):
            sealed = [(_unkeyed(table, r[1:]), r[0]) for r in rows]
            db.executemany(f"UPDATE {table} SET seal = ? WHERE id = ?", sealed)


def _resealed(sealer: Sealer, table: str, values: Any, stored: Any, keyed: Any) -> Any:
    try:
        sound = stored == _unkeyed(table, values)
    except (TypeError, ValueError):  # a column holding bytes: damage, kept visible
        sound = False
    return sealer.seal(table, keyed) if sound else stored


def key_and_chain(db: Db, keying: Keying) -> None:
    ledger_id = uuid.uuid4().hex
    key, source = new_key(
        keying.backend, keying.target, ledger_id, keying.secret, memory=keying.memory
    )
    keying.made = (key, source)
    sealer = Sealer(key, source)
    db.execute(
        "INSERT INTO ledger_meta (name, value) VALUES ('id', ?), ('key_check', ?)",
        (ledger_id, key_check(key)),
    )
    for table in ("sessions", "requests", "checkpoints", "records", "deletions"):
        for rows in _pages(db, table, ", ".join((*SEALED[table], "seal"))):
            sealed = [(_resealed(sealer, table, r[1:-1], r[-1], r[1:-1]), r[0]) for r in rows]
            db.executemany(f"UPDATE {table} SET seal = ? WHERE id = ?", sealed)
    # Summaries had no seal: those whose body still matches its digest are sealed.
    for rows in _pages(db, "summaries", ", ".join((*SEALED["summaries"], "body"))):
        sound = [r for r in rows if isinstance(r[-1], str) and sha256_hex(r[-1]) == r[13]]
        db.executemany("UPDATE summaries SET seal = ? WHERE id = ?",
                       [(sealer.seal("summaries", r[1:-1]), r[0]) for r in sound])  # fmt: skip
    heads = _chain(db, sealer)
    for rows in _pages(db, "sessions", "next_seq"):
        updates: list[tuple[Any, ...]] = []
        for sid, next_seq in rows:
            head = heads.get(sid)
            try:
                updates.append((head, sealer.seal(HEAD, (sid, next_seq, head)), sid))
            except (TypeError, ValueError):  # a damaged counter: verify reports it
                updates.append((head, None, sid))
        db.executemany("UPDATE sessions SET head = ?, head_seal = ? WHERE id = ?", updates)


def _chain(db: Db, sealer: Sealer) -> dict[str, Any]:
    """Chain every session's entries in seq order; the last seal of each session."""
    columns = ", ".join(_UNCHAINED["entries"])
    heads: dict[str, Any] = {}
    after: tuple[str, int] = ("", -1)
    while True:
        rows = db.execute(
            f"SELECT id, {columns}, seal FROM entries WHERE (session_id, seq) > (?, ?)"
            f" ORDER BY session_id, seq LIMIT {_BATCH}",
            after,
        ).fetchall()
        updates = []
        for r in rows:
            values, prev = r[1:-1], heads.get(r[1])
            seal = _resealed(sealer, "entries", values, r[-1], (*values, prev))
            updates.append((prev, seal, r[0]))
            heads[r[1]] = seal
        db.executemany("UPDATE entries SET prev_seal = ?, seal = ? WHERE id = ?", updates)
        if len(rows) < _BATCH:
            return heads
        after = (rows[-1][1], rows[-1][2])
