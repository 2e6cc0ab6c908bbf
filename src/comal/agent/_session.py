"""Sessions around the loop: starting one, a child for a sub-agent (LED-3), its lock (RES-2),
and the finish checks that must pass before a session may be closed (RES-5)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ledger import LedgerBackend, Scope
from ..messages import ToolCall
from ..ops import Actor, HostSettings, House, Policy
from ..ops._held import note_held
from ._lock import PgSessionLock, SessionLock, lock_path

__all__ = ["CHECKER", "Check", "lock_session", "run_checks", "spawn_child", "start_session"]

# Checks are configured by the operator, so they run as the operator, on the API surface.
CHECKER = Actor.operator("comal:checks")
LOCK_EVENT = "lock_cleared"


def start_session(
    ledger: LedgerBackend,
    tenant: str,
    agent: str,
    *,
    title: str | None = None,
    meta: dict[str, Any] | None = None,
    parent: str | None = None,
) -> Scope:
    """A new session (status ``active``). ``meta`` may carry ``model`` and ``tools_tokens``,
    which ``comal context`` reads to budget the session without running it."""
    return ledger.create_session(tenant, agent, title=title, meta=meta, parent=parent)


def spawn_child(
    ledger: LedgerBackend,
    parent: Scope,
    *,
    agent: str | None = None,
    title: str | None = None,
    meta: dict[str, Any] | None = None,
) -> Scope:
    """A child session of ``parent`` for a sub-agent (LED-3): same tenant and, unless
    ``agent`` names another, the parent's agent (so what the sub-agent recalls is its parent's
    agent's, MEM-2); its own ledger history, linked by ``parent``; its proposals are bound to
    a sub-agent actor."""
    return ledger.create_session(
        parent.tenant, agent or parent.agent, parent=parent.session, title=title, meta=meta
    )


def lock_session(
    ledger: LedgerBackend, scope: Scope, *, path: str | Path | None = None
) -> SessionLock | PgSessionLock:
    """Take the session's lock, or raise :class:`~comal.agent.SessionLocked`: a file lock
    beside an SQLite ledger, an advisory lock and a lease row in a PostgreSQL one. A lock left by
    a dead process (or, on PostgreSQL, a holder whose heartbeat stopped) is cleared and recorded
    as a ``lock_cleared`` event; history is kept (RES-2). While it is held, this process's
    houses of the session (and of its children) run calls with effects (their default guard,
    :class:`~comal.ops.SessionGuard`)."""
    if path is None:
        lock = ledger.session_lock(scope)
    else:
        lock = SessionLock(lock_path(path, scope.session), scope.session)
        lock.acquire()
    stale = lock.stale
    if stale is not None:
        try:
            ledger.add_record(
                scope,
                "event",
                LOCK_EVENT,
                {
                    "v": 1,
                    "previous": stale,
                    "reason": str(
                        stale.get("cleared")
                        or "its process is gone: the kernel "
                        "released its lock without a clean release"
                    )
                    + "; the session's history is kept as it was",
                },
            )
        except BaseException:
            lock.release()
            raise
    # The houses of this process may now change the session (their default guard, issue 30).
    note_held(lock)
    return lock


@dataclass(frozen=True, slots=True)
class Check:
    command: str
    status: str
    receipt: int | None
    output: str

    @property
    def passed(self) -> bool:
        return self.status == "ok"


def run_checks(house: House, commands: tuple[str, ...], run: str) -> list[Check]:
    """Run the configured checks through the house (RES-5), judged like any call: as the
    operator, on the API surface, under the operator's deny rules. They leave receipts but no
    conversation entries."""
    if not commands:
        return []
    # The operator configured these exact commands, so the mode does not ask for them; a deny
    # rule still wins, as everywhere.
    policy = house.policy
    denies = tuple(r for r in policy.rules if r.action == "deny")
    # The same factory as the agent's house: the operator's sandbox settings, protected paths
    # and bwrap hold for checks as for any Bash call.
    trusted = Policy("trusted", denies, policy.limits, policy.sandbox)
    checker = house.factory.but(
        policy=trusted, settings=HostSettings(mode="trusted"), approver=None
    ).house(house.scope)
    out: list[Check] = []
    for i, command in enumerate(commands):
        call = ToolCall(f"check-{run}-{i}", "Bash", json.dumps({"command": command}))
        outcome = checker.run(call, CHECKER, surface="api")
        receipt = checker.record(outcome, append_result=False)
        out.append(Check(command, receipt.status, receipt.record_id, outcome.result.text))
    return out
