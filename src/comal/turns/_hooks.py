"""The turn service's lifecycle hooks: ``PreCompact`` before maintenance runs jobs that store
stand-ins, ``PostCompact`` after, with what they made (:mod:`comal.plugins._lifecycle`).

Told, never asked: a compaction is the engine's and the operator's, so a hook's decision is
ignored here (only recorded). Each dispatch a hook answered is a ``hook`` event of the session.
A replay dispatches nothing: it has no session to tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope

__all__ = ["post_compact", "pre_compact"]

HOOK_EVENT = "hook"
Trigger = Literal["auto", "manual"]


def _made(records: Sequence[object]) -> list[dict[str, Any]]:
    keys = ("id", "depth", "first_seq", "last_seq")
    return [
        {"kind": type(r).__name__} | {k: getattr(r, k) for k in keys if hasattr(r, k)}
        for r in records
    ]


def _tell(ledger: LedgerBackend, scope: Scope, name: str, data: dict[str, Any]) -> None:
    from ..plugins import HookEvent, lifecycle  # loaded at the first compaction, not at import

    event = HookEvent(name, scope.tenant, scope.agent, scope.session, "model", None, data)  # type: ignore[arg-type]
    outcome = lifecycle(event)
    if outcome:
        ledger.add_record(scope, "event", HOOK_EVENT, outcome.as_dict())


def pre_compact(ledger: LedgerBackend, scope: Scope, trigger: Trigger) -> None:
    _tell(ledger, scope, "PreCompact", {"trigger": trigger, "custom_instructions": ""})


def post_compact(
    ledger: LedgerBackend, scope: Scope, trigger: Trigger, made: Sequence[object]
) -> None:
    _tell(ledger, scope, "PostCompact", {"trigger": trigger, "made": _made(made)})
