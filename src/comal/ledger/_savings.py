"""Migration ``0005_request_savings``: what prompt caching saved, priced once per request (CCH-2).

``comal sessions``, ``comal context``, ``/context`` and the TUI's status line show what caching
saved a session. They used to price every request of the session on every call, which grows with
the session (and, for ``comal sessions``, with the whole ledger). Now each request is priced once,
when it is recorded, into ``requests.saved_usd``, and the session row keeps the running
``request_count`` and ``saved_usd`` in the same transaction, so a report reads one row.

A request's saving is the ``savedVsUncached`` its meta carries (the agent stores it) or, for
imported usage, its measured usage priced by the table in force when it was recorded; ``NULL``
when unknown. A session's ``saved_usd`` is ``NULL`` until one of its requests has a known saving.
``verify`` compares the running totals with the requests they sum.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import ComalError
from ..messages import load_json

log = logging.getLogger("comal.ledger")

# The running totals as the requests give them (the backfill sets them, verify compares).
SESSION_SAVINGS = "SELECT session_id, count(*), sum(saved_usd) FROM requests GROUP BY session_id"
_SET_TOTALS = (
    "UPDATE sessions SET request_count = (SELECT count(*) FROM requests"
    " WHERE requests.session_id = sessions.id), saved_usd = (SELECT sum(saved_usd) FROM requests"
    " WHERE requests.session_id = sessions.id)"
)
# Totals that differ by less than this are rounding in the running sum, not damage.
TOLERANCE = 1e-6
_BATCH = 2000


def request_saving(
    meta: Mapping[str, Any],
    model: str | None,
    new_input: int | None,
    cache_read: int | None,
    cache_write: int | None,
) -> float | None:
    """The saving to store with a request. A price catalog that does not load makes the saving
    unknown, never the request lost: the request is what the ledger is for."""
    # Loaded here, not at import: the price catalog is read when a request is first recorded,
    # and a command that only lists sessions never loads it.
    from ..tokens import recorded_saving

    try:
        return recorded_saving(meta, model, new_input, cache_read, cache_write)
    except ComalError as exc:
        log.warning("ledger: request stored without its cache saving: %s", exc)
        return None


def backfill_savings(db: Any, _keying: Any) -> None:
    """Price the requests stored before the migration, then sum them into their sessions."""
    after = -1
    while True:
        rows = db.execute(
            "SELECT id, meta, model, new_input, cache_read, cache_write FROM requests"
            f" WHERE id > ? ORDER BY id LIMIT {_BATCH}",
            (after,),
        ).fetchall()
        if not rows:
            break
        updates = []
        for rid, meta, model, new_input, cache_read, cache_write in rows:
            try:
                decoded = load_json(meta)
            except Exception:  # a meta that does not decode: its saving is unknown; verify says so
                decoded = {}
            if not isinstance(decoded, dict):
                decoded = {}
            saved = request_saving(decoded, model, new_input, cache_read, cache_write)
            if saved is not None:
                updates.append((saved, rid))
        if updates:
            db.executemany("UPDATE requests SET saved_usd = ? WHERE id = ?", updates)
        after = rows[-1][0]
    db.execute(_SET_TOTALS)


def saving_mismatches(db: Any) -> list[tuple[str, int, float | None, int, float | None]]:
    """(session, expected count, expected saving, stored count, stored saving) for each session
    whose running totals disagree with its requests."""
    want = {
        str(r[0]): (int(r[1]), None if r[2] is None else float(r[2]))
        for r in db.execute(SESSION_SAVINGS).fetchall()
    }
    found: list[tuple[str, int, float | None, int, float | None]] = []
    for sid, count, saved in db.execute(
        "SELECT id, request_count, saved_usd FROM sessions"
    ).fetchall():
        exp_count, exp_saved = want.get(str(sid), (0, None))
        if not isinstance(saved, (int, float, type(None))) or not isinstance(count, int):
            found.append((str(sid), exp_count, exp_saved, -1, None))  # damaged: not numbers
            continue
        if saved is None or exp_saved is None:
            same = saved is None and exp_saved is None
        else:
            same = abs(float(saved) - exp_saved) <= TOLERANCE
        if count != exp_count or not same:
            found.append((str(sid), exp_count, exp_saved, count, saved))
    return found
