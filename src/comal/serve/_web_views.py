"""What the web page reads besides the dashboard's views: the transcript as every surface shows
it, the context gauge as the TUI's status line computes it, the board and the tree of work
steps, and the fingerprint of a session that the event stream turns into ``work``,
``compaction`` and ``child_*`` events.

All reads: nothing here writes a receipt (the ``/context`` and ``/state`` commands do, through
the house); the gauge is the TUI's status line, which is not receipted either.
"""

from __future__ import annotations

from typing import Any

from ..agent import Runtime, context_report
from ..agent._liveness import liveness
from ..agent._queue import pending
from ..agent._transcript import board_note, entry_lines
from ..errors import ComalError
from ..ledger import LedgerBackend, Scope
from ..work import work_view

__all__ = ["fingerprint", "gauge_view", "queued_view", "transcript_view", "work_tree"]


def transcript_view(
    ledger: LedgerBackend, scope: Scope, *, start: int = 0, limit: int = 2_000
) -> list[dict[str, Any]]:
    """The session's lines (:func:`comal.agent._transcript.entry_lines`) from ``start``."""
    tools: dict[str, str] = {}
    lines: list[dict[str, Any]] = []
    end = start + limit - 1
    for entry in ledger.entries(scope, start_seq=0, end_seq=end):
        shown = entry_lines(entry, tools)  # every call seen, so results name their tool
        if entry.seq >= start:
            lines += [line.as_dict() for line in shown]
    return lines


def queued_view(ledger: LedgerBackend, scope: Scope) -> list[dict[str, Any]]:
    """The messages sent while the agent worked and not delivered yet, oldest first (DRV-3):
    the page shows them as queued."""
    return [
        {"queued": q.id, "prompt": q.prompt, "mode": q.mode, "by": q.by.id, "at": q.at}
        for q in pending(ledger, scope)
    ]


def gauge_view(runtime: Runtime, working: bool) -> dict[str, Any]:
    """The TUI's status line as values: utilization of the window, measured or estimated,
    engine, model, board; an error says its code instead."""
    out: dict[str, Any] = {
        "model": runtime.spec,
        "mode": runtime.host.mode,
        "effort": runtime.host.effort,
        "name": runtime.host.name,
        "working": working,
        "board": board_note(runtime.ledger, runtime.scope),
    }
    if runtime.scope is None:
        return out
    try:
        report = context_report(runtime, runtime.proposer().preview())
    except ComalError as exc:
        return out | {"error": {"code": exc.code, "message": str(exc)}}
    keys = ("engine", "window", "input", "measured", "basis", "utilization", "threshold")
    return out | {k: report[k] for k in keys} | {"over_threshold": report["over_threshold"]}


def work_tree(ledger: LedgerBackend, scope: Scope) -> dict[str, Any]:
    """The board and the tree of work steps, as ``/state`` reads them (BRD-2, WRK-1)."""
    return work_view(ledger, scope)


def fingerprint(ledger: LedgerBackend, scope: Scope) -> dict[str, Any]:
    """What changes the page redraws on: the board and steps, compactions, children."""
    info = ledger.session(scope)
    stand_ins = len(ledger.checkpoints(scope)) + len(ledger.summaries(scope))
    return {
        "status": liveness(ledger, info) if info is not None else None,
        "entries": info.entries if info is not None else 0,
        "work": work_view(ledger, scope),
        "compactions": stand_ins,
        "children": {c.id: c.status for c in ledger.children(scope)},
    }


def changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[dict[str, Any]]:
    """The events between two fingerprints (nothing for the first one: the page loads it)."""
    if before is None:
        return []
    out: list[dict[str, Any]] = []
    if now["work"] != before["work"]:
        out.append({"kind": "work", "work": now["work"]})
    if now["compactions"] != before["compactions"]:
        out.append({"kind": "compaction", "stand_ins": now["compactions"]})
    for child, status in now["children"].items():
        was = before["children"].get(child)
        if was is None:
            out.append({"kind": "child_started", "child": child, "status": status})
        if status == "finished" and was != "finished":
            out.append({"kind": "child_finished", "child": child})
    if now["entries"] != before["entries"] or now["status"] != before["status"]:
        out.append({"kind": "ledger", "entries": now["entries"], "status": now["status"]})
    return out
