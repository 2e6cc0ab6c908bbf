"""The Python half of migration ``0003_ledger_hardening``, shared by both backends.

The DDL (new columns, indexes and the ``deletions`` table) is each backend's; this fills what the
rows stored before it lack, inside the migration's own transaction: every row's seal, each
session's ``last_step``, and the request columns the per-turn aggregates read (``tenant``,
``tokens``, ``run``, ``spent_at``, ``prompt_last_seq``), derived from each request's meta exactly
as new appends derive them. A row is sealed as it is found: damage done before the migration is
sealed in with it (``verify`` before upgrading, if that matters), bodies keep their own digests.
The running spend totals are summed from the requests.
"""

from __future__ import annotations

from typing import Any

from ..messages import load_json
from ._rows import SEALED, billed_tokens, request_facts, seal_of
from ._sql import Dialect

_BATCH = 2000

# The running spend totals, from the requests as they are (also what verify compares with).
SPEND_RUNS = (
    "SELECT tenant, run, sum(tokens) FROM requests WHERE run IS NOT NULL AND tenant IS NOT NULL"
    " GROUP BY tenant, run"
)
SPEND_MINUTES = (
    "SELECT tenant, substr(spent_at, 1, 16), sum(tokens) FROM requests"
    " WHERE spent_at IS NOT NULL AND tenant IS NOT NULL GROUP BY tenant, substr(spent_at, 1, 16)"
)
SPEND_TOTALS = (
    f"INSERT INTO spend_runs (tenant, run, tokens) {SPEND_RUNS}",
    f"INSERT INTO spend_minutes (tenant, minute, tokens) {SPEND_MINUTES}",
)


def backfill(conn: Any, dialect: Dialect) -> None:
    q = dialect.q
    conn.execute(
        "UPDATE sessions SET last_step = (SELECT max(step) FROM entries"
        " WHERE entries.session_id = sessions.id)"
    )
    conn.execute(
        "UPDATE requests SET tenant = (SELECT tenant FROM sessions"
        " WHERE sessions.id = requests.session_id)"
    )
    _derive_requests(conn, q)
    for statement in SPEND_TOTALS:
        conn.execute(statement)
    for table in ("sessions", "entries", "requests", "checkpoints", "records"):
        _seal(conn, q, table)


def _pages(conn: Any, q: Any, table: str, columns: str) -> Any:
    after: Any = "" if table == "sessions" else -1
    while True:
        rows = conn.execute(
            q(f"SELECT id, {columns} FROM {table} WHERE id > ? ORDER BY id LIMIT {_BATCH}"),
            (after,),
        ).fetchall()
        if not rows:
            return
        yield rows
        after = rows[-1][0]


def _derive_requests(conn: Any, q: Any) -> None:
    cols = "new_input, cache_read, cache_write, output, meta"
    for rows in _pages(conn, q, "requests", cols):
        updates = []
        for rid, new_input, cache_read, cache_write, output, meta in rows:
            try:
                facts = request_facts(load_json(meta))
            except Exception:  # a meta that does not decode: its facts are unknown; verify says so
                facts = (None, None, None)
            tokens = billed_tokens(new_input, cache_read, cache_write, output)
            updates.append((tokens, *facts, rid))
        conn.cursor().executemany(
            q(
                "UPDATE requests SET tokens = ?, run = ?, spent_at = ?, prompt_last_seq = ?"
                " WHERE id = ?"
            ),
            updates,
        )


def _seal(conn: Any, q: Any, table: str) -> None:
    for rows in _pages(conn, q, table, ", ".join(SEALED[table])):
        conn.cursor().executemany(
            q(f"UPDATE {table} SET seal = ? WHERE id = ?"),
            [(seal_of(table, r[1:]), r[0]) for r in rows],
        )
