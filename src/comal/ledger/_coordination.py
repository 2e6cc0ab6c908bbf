"""Coordination rows of the dag engine's compaction: the per-session single-flight lease
(DAG-8), summarizer spend per tenant and the per-tenant circuit breaker's state (DAG-9).

Times are epoch seconds. These rows are the only ones the dag engine updates in place: they are
state of the compaction machinery, not history (which stays append-only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ._model import Scope
from ._store import StoreBase

__all__ = ["LEASE_EVENT", "BreakerRow", "Coordination", "LeaseInfo"]

LEASE_EVENT = "lease_expired"  # the event kind of a compaction lease taken from a dead holder


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    owner: str
    acquired_at: float
    heartbeat_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class BreakerRow:
    tenant: str
    failures: int
    opened_at: float | None
    trial_at: float | None
    updated_at: float


class Coordination(StoreBase):
    """The lease, spend and breaker statements."""

    # -- the per-session compaction lease (DAG-8) -------------------------------------------
    def acquire_lease(
        self, scope: Scope, owner: str, ttl: float, *, now: float | None = None
    ) -> bool:
        """Take (or renew) the session's compaction lease for ``ttl`` seconds; False when
        another owner holds an unexpired one."""
        at = time.time() if now is None else now
        with self.atomic() as c:
            if self._session_row(scope, lock=True) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            row = c.execute(
                "SELECT owner, expires_at, acquired_at, heartbeat_at FROM compaction_leases"
                " WHERE session_id = ?",
                (scope.session,),
            ).fetchone()
            if row is None:
                c.execute(
                    "INSERT INTO compaction_leases (session_id, owner, acquired_at,"
                    " heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                    (scope.session, owner, at, at, at + ttl),
                )
                return True
            if row[0] != owner and float(row[1]) > at:
                return False
            if row[0] != owner:
                # A holder that stopped beating (killed, or its host gone): taken over, and the
                # takeover recorded in the same transaction (RES-2, SCL-1).
                records: Any = self  # the Store's Records part, beside this one
                ago = at - float(row[1])
                previous = {"owner": row[0], "acquired_at": float(row[2])}
                previous |= {"heartbeat_at": float(row[3]), "expires_at": float(row[1])}
                body = {"v": 1, "previous": previous, "taken_by": owner}
                body["reason"] = (
                    f"its heartbeat stopped: the lease had expired {ago:.1f} s before; what it "
                    "stored is kept"
                )
                records.add_record(scope, "event", LEASE_EVENT, body)
            c.execute(
                "UPDATE compaction_leases SET owner = ?, acquired_at = CASE WHEN owner = ?"
                " THEN acquired_at ELSE ? END, heartbeat_at = ?, expires_at = ?"
                " WHERE session_id = ?",
                (owner, owner, at, at, at + ttl, scope.session),
            )
            return True

    def renew_lease(
        self, scope: Scope, owner: str, ttl: float, *, now: float | None = None
    ) -> bool:
        """The heartbeat: extend the lease if ``owner`` still holds it."""
        at = time.time() if now is None else now
        with self.atomic() as c:
            cur = c.execute(
                "UPDATE compaction_leases SET heartbeat_at = ?, expires_at = ?"
                " WHERE session_id = ? AND owner = ?",
                (at, at + ttl, scope.session, owner),
            )
            return bool(cur.rowcount == 1)

    def release_lease(self, scope: Scope, owner: str) -> None:
        with self.atomic() as c:
            c.execute(
                "DELETE FROM compaction_leases WHERE session_id = ? AND owner = ?",
                (scope.session, owner),
            )

    def lease(self, scope: Scope) -> LeaseInfo | None:
        with self._reading() as c:
            if not self._visible(scope):
                return None
            row = c.execute(
                "SELECT owner, acquired_at, heartbeat_at, expires_at FROM compaction_leases"
                " WHERE session_id = ?",
                (scope.session,),
            ).fetchone()
        return None if row is None else LeaseInfo(row[0], *(float(v) for v in row[1:]))

    # -- summarizer spend and breaker (DAG-9) -----------------------------------------------
    def add_summarizer_spend(
        self, scope: Scope, tokens: int, summarizer: str, *, now: float | None = None
    ) -> None:
        at = time.time() if now is None else now
        with self.atomic() as c:
            if self._session_row(scope, lock=True) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            c.execute(
                "INSERT INTO summarizer_spend (tenant, session_id, at, tokens, summarizer)"
                " VALUES (?, ?, ?, ?, ?)",
                (scope.tenant, scope.session, at, tokens, summarizer),
            )

    def summarizer_spend(self, tenant: str, *, since: float, session: str | None = None) -> int:
        """Summarizer tokens the tenant (one of its sessions, when ``session`` is given)
        spent at or after ``since`` (epoch seconds)."""
        where, args = "tenant = ? AND at >= ?", [tenant, since]
        if session is not None:
            where, args = where + " AND session_id = ?", [*args, session]
        with self._reading() as c:
            row = c.execute(
                f"SELECT coalesce(sum(tokens), 0) FROM summarizer_spend WHERE {where}", tuple(args)
            ).fetchone()
        return int(row[0])

    def breaker(self, tenant: str) -> BreakerRow | None:
        with self._reading() as c:
            row = c.execute(
                "SELECT tenant, failures, opened_at, trial_at, updated_at"
                " FROM summarizer_breaker WHERE tenant = ?",
                (tenant,),
            ).fetchone()
        if row is None:
            return None
        opened = None if row[2] is None else float(row[2])
        trial = None if row[3] is None else float(row[3])
        return BreakerRow(row[0], int(row[1]), opened, trial, float(row[4]))

    def set_breaker(
        self,
        tenant: str,
        *,
        failures: int,
        opened_at: float | None,
        trial_at: float | None,
        now: float | None = None,
    ) -> None:
        at = time.time() if now is None else now
        with self.atomic() as c:
            c.execute(
                "INSERT INTO summarizer_breaker (tenant, failures, opened_at, trial_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant) DO UPDATE SET"
                " failures = excluded.failures, opened_at = excluded.opened_at,"
                " trial_at = excluded.trial_at, updated_at = excluded.updated_at",
                (tenant, failures, opened_at, trial_at, at),
            )
