"""Recovery adapters (PLG-2): what a fresh observation can prove about a call after a crash.

An operation with effects that declares an ``intent`` has it recorded in its durable
preparation before it acts (what it means to do: a digest, a target, an expected identity).
When the process dies between that preparation and the call's receipt, :func:`comal.ops.
reconcile` hands the recorded intent to the operation's adapter, which observes the world
afresh — reading only — and answers an :class:`Observed`:

- ``postcondition_observed``: the world shows exactly what the intent meant (an identity and a
  digest match). It does not claim the handler returned, nor who produced the state;
- ``not_applied``: the world provably still shows the state from before, and a repeat cannot
  double the effect (the adapter says why); the call is judged afresh and may run again;
- ``uncertain``: anything else — a mismatch, no answer, a read refused. The call is blocked
  from automatic repetition and the model is told why.

An adapter that raises is read as ``uncertain`` with the error as its reason: an observation
that failed proves nothing. Without an adapter, a call's effects stay unknown (RES-4).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ._workspace import Workspace

__all__ = ["Observed", "Recovery", "RecoveryAdapter", "RecoveryContext"]

Recovery = Literal["postcondition_observed", "not_applied", "uncertain"]


@dataclass(frozen=True, slots=True)
class RecoveryContext:
    """What an adapter may use: the session, its ledger and workspace, and the call's
    preparation (its record id, and the body the house wrote before acting)."""

    ledger: LedgerBackend
    scope: Scope
    workspace: Workspace | None
    call_id: str
    preparation: int
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Observed:
    """An adapter's answer: the status and what was observed (``reason`` says why, for any
    status but ``postcondition_observed``)."""

    status: Recovery
    observations: Mapping[str, Any] = field(default_factory=dict)
    # The text the model reads as the call's result (default: a line the reconciler writes).
    text: str | None = None


RecoveryAdapter = Callable[[Mapping[str, Any], RecoveryContext], Observed]
