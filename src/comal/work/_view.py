"""What every surface shows of a session's long work: its board, the tree of its work steps
and its drafts (``/state``, ``comal state``, ``comal show``, the TUI, the HTTP API)."""

from __future__ import annotations

from typing import Any

from ..ledger import LedgerBackend, Scope
from ..safe_text import one_line
from ._board import board_of
from ._drafts import drafts_of
from ._steps import steps_of

__all__ = ["BUDGET_EVENT", "render_work", "work_view"]

BUDGET_EVENT = "budget_limited"
# Work steps do not delegate further; a tree deeper than this is a library caller's own.
_DEPTH = 4


def work_view(ledger: LedgerBackend, scope: Scope, *, depth: int = 0) -> dict[str, Any]:
    """``{"board", "steps", "drafts", "budget_limited"}`` of the session; each step carries
    its child's own view (the tree), its outcome and its answer's reference."""
    steps = []
    for state in steps_of(ledger, scope):
        step = state.as_dict()
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
