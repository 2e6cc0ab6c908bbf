"""The turn service's lifecycle hooks: ``PreCompact`` before maintenance runs jobs that store
stand-ins, ``PostCompact`` after, with what they made (:mod:`comal.plugins._lifecycle`).

Told, never asked: a compaction is the engine's and the operator's, so a hook's decision is
ignored here (only recorded). Each dispatch a hook answered is a ``hook`` event of the session.
``host`` is what the surface lends the hooks (the agent's house; ``None`` for the proxy).
A replay dispatches nothing: it has no session to tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..ledger import LedgerBackend, Scope

if TYPE_CHECKING:
    from ..plugins import HookEvent, LifecycleEvent

__all__ = ["post_compact", "pre_compact"]

HOOK_EVENT = "hook"
Trigger = Literal["auto", "manual"]


def _made(records: Sequence[object]) -> list[dict[str, Any]]:
    keys = ("id", "depth", "first_seq", "last_seq")
    return [
        {"kind": type(r).__name__} | {k: getattr(r, k) for k in keys if hasattr(r, k)}
        for r in records
    ]


def _tell(ledger: LedgerBackend, scope: Scope, event: HookEvent) -> None:
    from ..plugins import lifecycle  # loaded by the first compaction, not import

    outcome = lifecycle(event)
    if outcome:
        ledger.add_record(scope, "event", HOOK_EVENT, outcome.as_dict())


def _event(name: LifecycleEvent, scope: Scope, data: dict[str, Any], host: object) -> HookEvent:
    # The house's workspace is the hooks' cwd; without one (a proxy's session) there is none.
    workspace = getattr(host, "workspace", None)
    cwd = str(workspace.root) if workspace is not None else None
    from ..plugins import HookEvent

    return HookEvent(name, scope.tenant, scope.agent, scope.session, "model", cwd, data, host)


def pre_compact(ledger: LedgerBackend, scope: Scope, trigger: Trigger, host: object = None) -> None:
    data = {"trigger": trigger, "custom_instructions": ""}
    _tell(ledger, scope, _event("PreCompact", scope, data, host))


def post_compact(
    ledger: LedgerBackend,
    scope: Scope,
    trigger: Trigger,
    made: Sequence[object],
    host: object = None,
) -> None:
    data = {"trigger": trigger, "made": _made(made)}
    _tell(ledger, scope, _event("PostCompact", scope, data, host))
