"""The board (BRD-1..3): the task's criteria, derived from receipts, never from a file.

Every change to the board is carried by the receipt of the call that made it, under
``observations["board"]``: a list of versioned changes::

    {"v": 1, "op": "add", "item": 3, "text": …, "check": …, "depends_on": [1], "evidence": [...]}
    {"v": 1, "op": "update", "item": 3, "status": "done", "text": …, "check": …, "evidence": [...]}
    {"v": 1, "op": "checked", "item": 3, "passed": true, "receipt": 41, "status": "ok",
     "command": …, "tail": …}

The receipts that may carry them are those of ``BoardAdd``, ``BoardUpdate`` and
``finish_call`` (:data:`BOARD_KINDS`); :func:`board_of` folds them in record order, so any
process that reads the ledger derives the same board. The model can only propose those calls:
it has no way to write a receipt, and ``checked`` changes come only from a check the house ran
(its own receipt is named), so ``verified`` is never the model's word (BRD-3). A failing check
leaves the item ``done`` with the failure as its evidence.

:meth:`Board.render` is the one text of the board: the result of every board operation ends
with it (after a ``[board]`` line), so the context engines carry the newest one across their
compactions (a limit checkpoint's work state, the pipeline's and the dag's restored context).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ..safe_text import one_line

__all__ = [
    "BOARD_HEADER",
    "BOARD_KINDS",
    "STATUSES",
    "Board",
    "BoardItem",
    "ItemStatus",
    "board_of",
]

ItemStatus = Literal["pending", "in_progress", "done", "verified"]
STATUSES: tuple[ItemStatus, ...] = ("pending", "in_progress", "done", "verified")
BOARD_KINDS = ("BoardAdd", "BoardUpdate", "finish_call")
# The first line of every rendering: the engines find the board in a result by it.
BOARD_HEADER = "[board]"
_TAIL = 300


@dataclass(frozen=True, slots=True)
class BoardItem:
    """One criterion. ``evidence`` holds what it rests on: ``{"path", "sha256", "record"}``
    for a workspace file kept as a stored output, ``{"note"}`` for words, ``{"check",
    "passed"}`` for a check the house ran (its receipt's record id)."""

    id: int
    text: str
    status: ItemStatus = "pending"
    depends_on: tuple[int, ...] = ()
    check: str | None = None
    evidence: tuple[Mapping[str, Any], ...] = ()
    last_check: Mapping[str, Any] | None = None

    @property
    def closed(self) -> bool:
        return self.status in ("done", "verified")

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "status": self.status,
            "depends_on": list(self.depends_on),
            "check": self.check,
            "evidence": [dict(e) for e in self.evidence],
            "last_check": dict(self.last_check) if self.last_check is not None else None,
        }


@dataclass(frozen=True, slots=True)
class Board:
    items: tuple[BoardItem, ...] = ()
    # The record id of the newest receipt that changed it (0: never changed).
    mark: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)

    def get(self, item: int) -> BoardItem | None:
        return self.items[item - 1] if 0 < item <= len(self.items) else None

    @property
    def open_items(self) -> tuple[BoardItem, ...]:
        return tuple(i for i in self.items if not i.closed)

    def as_dict(self) -> dict[str, Any]:
        return {"items": [i.as_dict() for i in self.items], "counts": dict(self.counts)}

    def render(self) -> str:
        """The board as every surface and every board result shows it."""
        if not self.items:
            return f"{BOARD_HEADER} empty: add the task's criteria with BoardAdd"
        tally = " · ".join(f"{n} {s}" for s in STATUSES if (n := self.counts.get(s, 0)))
        lines = [f"{BOARD_HEADER} {len(self.items)} items: {tally}"]
        for item in self.items:
            line = f"#{item.id} [{item.status}] {one_line(item.text)}"
            if item.depends_on:
                line += " (after " + ", ".join(f"#{d}" for d in item.depends_on) + ")"
            lines.append(line)
            if item.check is not None:
                lines.append(f"   check: {one_line(item.check)}{_check_note(item.last_check)}")
            kept = [_evidence_note(e) for e in item.evidence if "check" not in e]
            if kept:
                lines.append("   evidence: " + "; ".join(kept))
        return "\n".join(lines)

    # -- folding ------------------------------------------------------------------------------
    def apply(self, change: Mapping[str, Any], record: int) -> Board:
        op, number = change.get("op"), change.get("item")
        items = list(self.items)
        if op == "add" and number == len(items) + 1:
            items.append(
                BoardItem(
                    number,
                    str(change.get("text", "")),
                    depends_on=tuple(int(d) for d in change.get("depends_on", ())),
                    check=change.get("check"),
                    evidence=tuple(change.get("evidence", ())),
                )
            )
        elif isinstance(number, int) and (item := self.get(number)) is not None:
            items[number - 1] = _changed(item, op, change)
        return _counted(tuple(items), max(self.mark, record))


def _changed(item: BoardItem, op: object, change: Mapping[str, Any]) -> BoardItem:
    if op == "update":
        status = change.get("status", item.status)
        return replace(
            item,
            text=str(change.get("text", item.text)),
            check=change.get("check", item.check),
            status=status if status in STATUSES else item.status,
            evidence=item.evidence + tuple(change.get("evidence", ())),
        )
    if op == "checked":
        passed = bool(change.get("passed"))
        seen = {k: change.get(k) for k in ("passed", "receipt", "status", "command", "tail")}
        return replace(
            item,
            status="verified" if passed else "done",
            last_check=seen,
            evidence=(*item.evidence, {"check": change.get("receipt"), "passed": passed}),
        )
    return item


def _counted(items: tuple[BoardItem, ...], mark: int) -> Board:
    counts: dict[str, int] = {}
    for item in items:
        counts[item.status] = counts.get(item.status, 0) + 1
    return Board(items, mark, counts)


def _check_note(seen: Mapping[str, Any] | None) -> str:
    if seen is None:
        return " (not run yet)"
    receipt = seen.get("receipt")
    if seen.get("passed"):
        return f" — passed (receipt {receipt})"
    tail = one_line(str(seen.get("tail") or ""))[-_TAIL:]
    return f" — FAILED, {seen.get('status')} (receipt {receipt}){': ' + tail if tail else ''}"


def _evidence_note(e: Mapping[str, Any]) -> str:
    if "path" in e:
        digest = str(e.get("sha256") or "")[:12]
        kept = f", record {e['record']}" if e.get("record") is not None else ""
        return f"{one_line(str(e['path']))} (sha256 {digest}…{kept})"
    return one_line(str(e.get("note", "")))


def fold(changes: Iterable[tuple[int, Mapping[str, Any]]], board: Board | None = None) -> Board:
    """``board`` (empty by default) with ``(record id, change)`` pairs applied in order."""
    out = board if board is not None else Board()
    for record, change in changes:
        if isinstance(change, Mapping) and change.get("v") == 1:
            out = out.apply(change, record)
    return out


def board_of(ledger: LedgerBackend, scope: Scope) -> Board:
    """The session's board, folded from the receipts that carry its changes."""
    pairs: list[tuple[int, Mapping[str, Any]]] = []
    for rec in ledger.records(scope, "receipt", kinds=BOARD_KINDS):
        observed = rec.body.get("observations") or {}
        changes = observed.get("board") if isinstance(observed, Mapping) else None
        if isinstance(changes, list):
            pairs += [(rec.id, c) for c in changes]
    return fold(pairs)
