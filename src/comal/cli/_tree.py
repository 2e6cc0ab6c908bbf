"""The tree of sessions and work steps, as ``comal sessions`` and ``comal show`` print it
(LED-3, WRK-1): a work step's child session under its parent, and a session's board, steps
and drafts under its entries."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ledger import LedgerBackend, Scope, SessionInfo

__all__ = ["in_tree_order", "work_lines"]


def in_tree_order(rows: list[SessionInfo]) -> list[tuple[SessionInfo, int]]:
    """``rows`` with every child right under its parent (depth given), roots in their order;
    a child whose parent is not listed stands as a root."""
    listed = {s.id for s in rows}
    kids: dict[str, list[SessionInfo]] = {}
    for s in rows:
        if s.parent is not None and s.parent in listed:
            kids.setdefault(s.parent, []).append(s)
    out: list[tuple[SessionInfo, int]] = []

    def walk(s: SessionInfo, depth: int) -> None:
        out.append((s, depth))
        for kid in kids.get(s.id, []):
            walk(kid, depth + 1)

    for s in rows:
        if s.parent is None or s.parent not in listed:
            walk(s, 0)
    return out


def work_lines(led: LedgerBackend, scope: Scope) -> list[str]:
    """The session's board, work steps (a tree) and drafts; its parent if it is a step."""
    from ..work import render_work, work_view

    lines = render_work(work_view(led, scope))
    info = led.session(scope)
    if info is not None and info.parent is not None:
        lines.insert(0, f"work step of session {info.parent}")
    return lines
