"""A call whose result cannot join its step still leaves its receipt (issue 18).

A model-surface result is appended to the step that proposed its call, and only the session's
latest step can be joined. Two houses on one session without the session's lock (library use:
``House.of(...)`` built directly, no guard) interleave their steps, so one house's call can find
its step overtaken by the other's: its ``record()`` used to fail after the call had run, and
the effect had no receipt. Now:

- before any effect, the preparation (RES-3) is written in one transaction with the check that
  the call's step is still the session's latest; when it is not, nothing runs and the call's
  result says ``SESSION_CONTENDED``;
- after the effect, when a step was appended while the call ran, the receipt is written
  without the result, whose text is kept as a stored output (nothing the call returned is
  lost), and :class:`~comal.ops.SessionContended` is raised once the receipt is durable.

So every executed call has its receipt; the session lock (the agent's guard) is what keeps two
writers from interleaving in the first place.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import ComalError
from ..ledger import LedgerBackend, Scope
from ._errors import SessionContended
from ._guard import guard_output
from ._receipt import Receipt

__all__ = ["kept_apart", "overtaken"]


def overtaken(
    ledger: LedgerBackend, scope: Scope, call_id: str, step: int
) -> SessionContended | None:
    """Why a result of ``step`` cannot be appended now, or ``None`` when it can."""
    last = ledger.tail(scope, n=1)
    latest = last[-1].step if last else None
    if latest == step:
        return None
    return SessionContended(
        f"call {call_id}'s step {step} is no longer the latest of session {scope.session}: "
        f"another writer appended step {latest} after it (two houses on one session without "
        "its lock). Give each house the session lock's guard, or run one house per session"
    )


def kept_apart(
    ledger: LedgerBackend, scope: Scope, receipt: Receipt, text: str, error: ComalError
) -> Receipt:
    """``receipt`` for a call whose result ``text`` is not in the conversation: the text kept
    as a stored output when the call ran and it is not stored yet, and the reason noted."""
    output = receipt.output
    if output is not None and output.stored is None and text:
        _, stored = guard_output(
            ledger, scope, call_id=receipt.call_id, operation=receipt.operation, text=text, cap=0
        )
        if stored is not None:
            output = replace(output, stored=stored.as_dict())
    seen = dict(receipt.observations) | {"unjoined": {"code": error.code, "reason": str(error)}}
    return replace(receipt, output=output, observations=seen, result_entry=None)
