"""What every surface shows of a session's long work: its board, the tree of its work steps
and its drafts (``/state``, ``comal state``, ``comal show``, the TUI, the HTTP API).

A step that ended incomplete and that the newest finish accepted (``finish_call``'s
``accept_incomplete``, recorded in its ``finish_checks`` event) carries ``accepted``: the
reason, that event's record and whether that finish passed."""

from __future__ import annotations

from typing import Any

from ..ledger import LedgerBackend, Scope
from ..safe_text import one_line
from ._board import board_of
from ._drafts import drafts_of
from ._steps import steps_of

__all__ = ["BUDGET_EVENT", "FINISH_EVENT", "render_work", "work_view"]

BUDGET_EVENT = "budget_limited"
# Every finish that got as far as its checks: {"v", "run", "call_id", "passed", "checks",
# "board", "accepted_incomplete"}.
FINISH_EVENT = "finish_checks"
# Work steps do not delegate further; a tree deeper than this is a library caller's own.
_DEPTH = 4


def work_view(ledger: LedgerBackend, scope: Scope, *, depth: int = 0) -> dict[str, Any]:
    """``{"board", "steps", "drafts", "budget_limited"}`` of the session; each step carries
    its child's own view (the tree), its outcome and its answer's reference."""
    steps = []
    accepted = _accepted(ledger, scope)
    for state in steps_of(ledger, scope):
        step = state.as_dict()
        if state.delegation.n in accepted:
            step["accepted"] = accepted[state.delegation.n]
        if depth < _DEPTH:
            child = state.delegation.scope(scope)
            if ledger.session(child) is not None:
                step["work"] = work_view(ledger, child, depth=depth + 1)
        steps.append(step)
    limited = ledger.records(scope, "event", kinds=(BUDGET_EVENT,))
    return {
        "board": board_of(ledger, scope).as_dict(),
        "steps": steps,
        "drafts": [d.as_dict() for d in drafts_of(ledger, scope)],
        "budget_limited": limited[-1].body if limited else None,
    }


def _accepted(ledger: LedgerBackend, scope: Scope) -> dict[int, dict[str, Any]]:
    """The incomplete steps the newest finish accepted: a later finish stands for the task."""
    finishes = ledger.records(scope, "event", kinds=(FINISH_EVENT,))
    if not finishes:
        return {}
    last = finishes[-1]
    passed = bool(last.body.get("passed"))
    return {
        int(row["step"]): {"reason": str(row["reason"]), "record": last.id, "passed": passed}
        for row in last.body.get("accepted_incomplete") or ()
    }


def render_work(view: dict[str, Any], indent: str = "", *, board: bool = True) -> list[str]:
    """The view as lines: board items (unless ``board`` is false), then the steps as a tree
    (each with its child's own work), then the drafts."""
    lines: list[str] = []
    items = view["board"]["items"] if board else []
    if items:
        lines.append(f"{indent}board:")
        for item in items:
            text = f"{indent}  #{item['id']} [{item['status']}] {one_line(item['text'])}"
            lines.append(text)
    for step in view["steps"]:
        head = f"{indent}step #{step['n']} {step['child']} {step['outcome']} ({step['status']})"
        lines.append(f"{head}: {one_line(step['objective'])[:80]}")
        accepted = step.get("accepted")
        if accepted:
            said = f"{indent}  accepted at finish: {one_line(accepted['reason'])}"
            lines.append(said + ("" if accepted["passed"] else " (that finish did not pass)"))
        if "work" in step:
            lines += render_work(step["work"], indent + "  ")
    for draft in view["drafts"]:
        lines.append(
            f"{indent}draft {one_line(draft['title'])!r} v{draft['version']}: record "
            f"{draft['record']}, {draft['chars']:,} characters, sha256 {draft['sha256'][:16]}…"
        )
    limited = view.get("budget_limited")
    if limited:
        lines.append(f"{indent}stopped: budget_limited ({one_line(str(limited.get('why', '')))})")
    return lines
