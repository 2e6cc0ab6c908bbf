"""What a finish accepts of the work steps that ended incomplete (WRK-3, WRK-5).

A step that ended incomplete (out of turns or budget, its model failed, its process died and
its run was closed otherwise) is never a success, so the task it belongs to does not close over
it in silence: ``finish_call`` passes only when each such step is named in its
``accept_incomplete`` with the reason the task holds without it, checked against the steps the
ledger holds. What is accepted is recorded in the finish's receipt and its ``finish_checks``
event, and shown beside the step by ``/state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import FinishIncomplete
from ._ops import AcceptIncomplete
from ._steps import StepState

__all__ = ["accepted_incomplete"]


def accepted_incomplete(
    states: Sequence[StepState], accept: Sequence[AcceptIncomplete]
) -> list[dict[str, Any]]:
    """What the finish accepts: every step that ended incomplete, each named once with its
    reason, and nothing else; else :class:`~comal.work.FinishIncomplete`, saying what."""
    incomplete = {s.delegation.n: s for s in states if s.outcome == "incomplete"}
    outcomes = {s.delegation.n: s.outcome for s in states}
    named = [a.step for a in accept]
    problems = []
    for n in dict.fromkeys(named):
        if named.count(n) > 1:
            problems.append(f"step #{n} is named {named.count(n)} times: name it once")
        if n not in outcomes:
            problems.append(f"there is no step #{n} in this session (it has {len(states)})")
        elif n not in incomplete:
            problems.append(f"step #{n} is {outcomes[n]}, not incomplete: nothing to accept")
    missing = [s for n, s in incomplete.items() if n not in named]
    if missing:
        problems += [s.headline() for s in missing]
        problems.append(
            "Run such a step again (WorkStepRun), or, if the task holds without it, call "
            'finish_call with accept_incomplete=[{"step": N, "reason": "why"}] for each: '
            "the reason is recorded in the receipt and shown by /state"
        )
    if problems:
        head = (
            "a work step ended incomplete and is not accepted"
            if missing
            else "accept_incomplete names what is not an incomplete step of this session"
        )
        lines = "\n".join(f"- {p}" for p in problems)
        raise FinishIncomplete(f"[finish] NOT finished: {head}:\n{lines}")
    reasons = {a.step: a.reason for a in accept}
    return [_row(s, reasons[n]) for n, s in incomplete.items()]


def _row(state: StepState, reason: str) -> dict[str, Any]:
    error = state.error.get("code") if state.error else None
    d = state.delegation
    return {"step": d.n, "child": d.child, "status": state.status, "error": error,
            "reason": reason}  # fmt: skip
