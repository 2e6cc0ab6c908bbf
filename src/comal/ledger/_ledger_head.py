"""The ledger's own head: which sessions it holds, sealed, so a session deleted whole is found.

Each session seals its rows and its chain, but a session removed with every row naming it
leaves nothing behind to fail. So the ledger keeps one more sealed row, ``ledger_head`` (name
``sessions``): ``sessions``, how many there are; ``digest``, the sum modulo 2**256 of every
session's *mark* (the HMAC of its id under the ledger's secret, as 64 hex digits); and
``generation``, how many times a session was created or deleted since the head was made. Its
seal covers the ledger's id too, so the id (which names the key file and what this machine last
saw, ``_rollback``) cannot be changed without the head failing.

A sum, not a chain: creating a session adds its mark and deleting one (tombstoned, the only
deletion there is) takes it out again, each O(1) whatever the number of sessions, and the
order sessions were made in does not matter. Without the secret no mark can be computed, so a
writer of the database cannot take one out, or put another session's in.

The head moves only when the set of sessions does, in the same transaction: appends never touch
it, so writers appending to different sessions of a PostgreSQL ledger do not queue for one row
(creating and deleting sessions do: each holds the row's lock until it commits). Each session's
own sealed head already covers its rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import LedgerRowDamaged
from ._seal import NOT_SHOWN, Sealer

if TYPE_CHECKING:
    from ._db import Db

NAME = "sessions"
_MOD = 1 << 256


@dataclass(frozen=True, slots=True)
class LedgerHead:
    generation: int
    sessions: int
    digest: str


def mark(sealer: Sealer, session: str) -> int:
    return int(sealer.seal("ledger_session", (session,)), 16)


def expected(sealer: Sealer, sessions: Iterable[Any]) -> tuple[int, str]:
    """(count, digest) of the sessions given: what the head should say of them."""
    total = n = 0
    for sid in sessions:
        n += 1
        try:
            total += mark(sealer, sid)
        except (TypeError, ValueError):  # an id that is not text: damage verify names anyway
            total += 1
    return n, f"{total % _MOD:064x}"


def _seal(sealer: Sealer, ledger_id: Any, head: LedgerHead) -> str:
    return sealer.seal("ledger_head", (ledger_id, head.generation, head.sessions, head.digest))


def head_matches(sealer: Sealer, ledger_id: Any, row: Sequence[Any] | None) -> bool:
    """Whether a raw ``(generation, sessions, digest, seal)`` row is the sealed head."""
    if row is None:
        return False
    values = (ledger_id, row[0], row[1], row[2])
    return sealer.matches("ledger_head", values, row[3])


def read(c: Db, sealer: Sealer, ledger_id: Any, *, lock: bool = False) -> LedgerHead:
    """The head, its seal checked (:class:`LedgerRowDamaged` when it fails or is missing);
    ``lock`` holds the row for the rest of the transaction (PostgreSQL)."""
    row = c.execute(
        "SELECT generation, sessions, digest, seal FROM ledger_head WHERE name = ?"
        + (c.dialect.for_update if lock else ""),
        (NAME,),
    ).fetchone()
    if row is None or not head_matches(sealer, ledger_id, row):
        stored = "(missing)" if row is None else str(row[3])
        raise LedgerRowDamaged("ledger_head", NAME, None, "seal", stored, NOT_SHOWN)
    return LedgerHead(int(row[0]), int(row[1]), str(row[2]))


def advance(
    c: Db,
    sealer: Sealer,
    ledger_id: Any,
    *,
    added: Sequence[str] = (),
    removed: Sequence[str] = (),
) -> LedgerHead:
    """Move the head over sessions ``added`` and ``removed`` in the caller's transaction."""
    head = read(c, sealer, ledger_id, lock=True)
    total = int(head.digest, 16)
    total += sum(mark(sealer, sid) for sid in added)
    total -= sum(mark(sealer, sid) for sid in removed)
    new = LedgerHead(
        head.generation + 1, head.sessions + len(added) - len(removed), f"{total % _MOD:064x}"
    )
    c.execute(
        "UPDATE ledger_head SET generation = ?, sessions = ?, digest = ?, seal = ? WHERE name = ?",
        (new.generation, new.sessions, new.digest, _seal(sealer, ledger_id, new), NAME),
    )
    return new


def start(c: Db, sealer: Sealer, ledger_id: Any) -> None:
    """Make the head over the sessions stored now (migration ``0011_sealed_identity``)."""
    ids = (r[0] for r in c.execute("SELECT id FROM sessions ORDER BY id").fetchall())
    n, digest = expected(sealer, ids)
    head = LedgerHead(0, n, digest)
    c.execute(
        "INSERT INTO ledger_head (name, generation, sessions, digest, seal) VALUES (?, ?, ?, ?, ?)",
        (NAME, head.generation, head.sessions, head.digest, _seal(sealer, ledger_id, head)),
    )
