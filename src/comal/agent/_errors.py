"""Errors of the agent loop (:mod:`comal.agent`), each under the :mod:`comal.errors` class a
caller would already catch::

    AgentError                              root of this package's errors
    ├── SpendCapExceeded                    TOK-6: a spend cap would be crossed; nothing was sent
    ├── IncompleteResponse                  the provider stopped for no length reason ("error")
    │   └── DuplicateCallIds                a reply gave two tool calls one id; none ran
    ├── RepeatedOutputLength (OutputLength) OUTPUT_LENGTH again after a larger reserve (OUT-3)
    └── RepeatedContextLength (ContextLength) CONTEXT_LENGTH again after a recalibration

Every message says what happened and ends with what to do. ``ScriptEnded`` (the ``script:``
model has no reply for a call) lives with that model, in :mod:`comal.providers.script`, and
``SessionLocked`` (UserError: another live process holds the session, RES-2) with the ledger,
which takes session locks; this package re-exports both. A run that stops at its turn cap is
not an error: it returns with status ``max_turns`` and can be resumed.
"""

from __future__ import annotations

from typing import Any

from ..errors import ComalError, ContextLength, OutputLength
from ..ledger import SessionLocked

__all__ = [
    "AgentError",
    "BudgetLimited",
    "DuplicateCallIds",
    "HookStopped",
    "IncompleteResponse",
    "RepeatedContextLength",
    "RepeatedOutputLength",
    "SessionLocked",
    "SpendCapExceeded",
]


class AgentError(ComalError):
    code = "AGENT_ERROR"


class SpendCapExceeded(AgentError):
    """TOK-6: ``tier`` is ``execution``, ``hour`` or ``day``; the call was never sent."""

    code = "SPEND_CAP"

    def __init__(self, message: str, *, tier: str, cap: int, spent: int, projected: int) -> None:
        super().__init__(message)
        self.tier = tier
        self.cap = cap
        self.spent = spent
        self.projected = projected

    def as_dict(self) -> dict[str, Any]:
        return {"tier": self.tier, "cap": self.cap, "spent": self.spent, "next": self.projected}


class IncompleteResponse(AgentError):
    code = "INCOMPLETE_RESPONSE"


class DuplicateCallIds(IncompleteResponse):
    """A reply whose tool calls share an id cannot be paired with its results (LIM-4): it is
    refused before any of its calls runs, and recorded like an incomplete reply (OUT-2)."""

    code = "DUPLICATE_CALL_IDS"


class RepeatedOutputLength(AgentError, OutputLength):
    """OUT-2/3: twice out of output at the same point; the same request is not sent again."""

    code = "OUTPUT_LENGTH"


class RepeatedContextLength(AgentError, ContextLength):
    """OUT-1: the provider rejected the input again after one recalibrated assembly."""

    code = "CONTEXT_LENGTH"


class HookStopped(AgentError):
    """A lifecycle hook asked the run to end (Claude Code's ``continue: false``): the run
    stopped as ``stopped`` (the run's ``error``, with the hook's reason; not raised)."""

    code = "HOOK_STOPPED"


class BudgetLimited(AgentError):
    """The task's budget (``work.budget``) is spent: the run stopped as ``budget_limited``
    (the run's ``error``, saying what remains; not raised)."""

    code = "BUDGET_LIMITED"
