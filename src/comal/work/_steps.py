"""Delegated work steps as the ledger records them (WRK-1..3, LED-3), and what they came to.

Records in the coordinator's session (table ``event``; bodies versioned ``{"v": 1, …}``):

- ``work_delegated`` — written with the child session, in one transaction, *before* the child
  starts: ``{"call_id", "n", "child", "agent", "objective", "config"}`` (``config``: the
  child's tools, engine, window, max_turns, budget and model spec). One per WorkStepRun call:
  a call judged again after a crash finds its record and never makes a second child;
- ``work_started`` — a run of the child began in this process: ``{"child", "n", "run",
  "resumed"}``;
- ``work_ended`` — that run ended: ``{"child", "n", "run", "status", "error"}``.

What a step came to is read from the child's own session, never from a process's memory
(WRK-2): a child whose session is ``finished`` is done, its answer the text of its last
assistant message, its receipts its own; a run that ended any other way after its last start
leaves the step ``incomplete`` (a child that died is never a success); a step with no run, or
whose last run has no end (the process was killed), is ``unfinished`` and resumes in its own
session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ..messages import Role, Text, sha256_hex
from ..ops import Receipt, receipts
from ..safe_text import one_line

__all__ = [
    "DELEGATED",
    "ENDED",
    "STARTED",
    "Delegation",
    "StepState",
    "child_answer",
    "delegation_for",
    "delegations",
    "step_state",
    "steps_of",
]

DELEGATED = "work_delegated"
STARTED = "work_started"
ENDED = "work_ended"
StepOutcome = Literal["finished", "incomplete", "unfinished"]
_OBJECTIVE_SHOWN = 120


@dataclass(frozen=True, slots=True)
class Delegation:
    """The durable record of one delegated step (see the module docstring)."""

    record: int
    n: int
    call_id: str
    child: str
    agent: str
    objective: str
    config: Mapping[str, Any]

    def scope(self, parent: Scope) -> Scope:
        return Scope(parent.tenant, self.agent, self.child)

    def as_dict(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "n": self.n,
            "call_id": self.call_id,
            "child": self.child,
            "agent": self.agent,
            "objective": self.objective,
            "config": dict(self.config),
        }


def delegations(ledger: LedgerBackend, scope: Scope) -> list[Delegation]:
    """Every step this session delegated, in the order it delegated them."""
    out = []
    for rec in ledger.records(scope, "event", kinds=(DELEGATED,)):
        b = rec.body
        out.append(
            Delegation(
                rec.id,
                int(b["n"]),
                str(b["call_id"]),
                str(b["child"]),
                str(b["agent"]),
                str(b["objective"]),
                dict(b.get("config") or {}),
            )
        )
    return out


def delegation_for(ledger: LedgerBackend, scope: Scope, call_id: str) -> Delegation | None:
    return next((d for d in delegations(ledger, scope) if d.call_id == call_id), None)


@dataclass(frozen=True, slots=True)
class StepState:
    """What one step came to, read from the ledger: ``outcome`` (finished, incomplete,
    unfinished), the child's last ``status``, its answer and where it is stored, its receipts
    and its model turns."""

    delegation: Delegation
    outcome: StepOutcome
    status: str
    answer: str = ""
    answer_entry: int | None = None
    answer_sha256: str | None = None
    receipts: tuple[Receipt, ...] = ()
    turns: int = 0
    error: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        d = self.delegation
        return {
            "n": d.n,
            "child": d.child,
            "call_id": d.call_id,
            "objective": d.objective,
            "outcome": self.outcome,
            "status": self.status,
            "turns": self.turns,
            "answer_entry": self.answer_entry,
            "answer_sha256": self.answer_sha256,
            "receipts": [r.record_id for r in self.receipts],
            "error": dict(self.error) if self.error is not None else None,
        }

    def headline(self) -> str:
        d = self.delegation
        objective = one_line(d.objective)
        if len(objective) > _OBJECTIVE_SHOWN:
            objective = objective[: _OBJECTIVE_SHOWN - 1] + "…"
        head = f"step #{d.n} (child {d.child}: {objective}): "
        if self.outcome == "finished":
            return head + f"finished in {self.turns} turns"
        if self.outcome == "incomplete":
            why = f" — {self.error.get('code')}" if self.error else ""
            return head + f"INCOMPLETE: its run ended {self.status}{why}; not a success"
        return head + f"not finished yet ({self.status}, {self.turns} turns so far)"

    def render(self) -> str:
        """The step as the coordinator reads it: headline, answer with its exact reference,
        and the child's receipts."""
        lines = [self.headline()]
        d = self.delegation
        if self.answer_entry is not None:
            ref = f'EvidenceRead(session="{d.child}", entry={self.answer_entry}, field="text")'
            lines.append(f"answer (sha256 {self.answer_sha256}; {ref}):")
            lines.append(self.answer or "(no text)")
        done = [_receipt_line(r) for r in self.receipts if not r.call_id.startswith("finish-")]
        if done:
            lines.append("receipts: " + "; ".join(done))
        return "\n".join(lines)


def _receipt_line(r: Receipt) -> str:
    paths = sorted({p for e in r.effects for p in e.paths})
    what = f"{r.operation} {', '.join(paths)}" if paths else r.operation
    return f"{one_line(what)} {r.status} (record {r.record_id})"


def child_answer(ledger: LedgerBackend, scope: Scope) -> tuple[str, int | None]:
    """The text of the session's last assistant message and its entry id."""
    heads = ledger.heads(scope)
    last = next((h for h in reversed(heads) if h.role == Role.ASSISTANT.value), None)
    entry = ledger.entry(scope, last.id) if last is not None else None
    if entry is None:
        return "", None
    text = "\n".join(p.text for p in entry.message.parts if isinstance(p, Text) and p.text)
    return text, entry.id


def _runs(ledger: LedgerBackend, parent: Scope) -> dict[str, tuple[int, Mapping[str, Any]]]:
    """Per child, its newest ``work_started`` or ``work_ended`` record (id, body + kind)."""
    newest: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for rec in ledger.records(parent, "event", kinds=(STARTED, ENDED)):
        newest[str(rec.body.get("child"))] = (rec.id, {**rec.body, "kind": rec.kind})
    return newest


def step_state(
    ledger: LedgerBackend,
    parent: Scope,
    d: Delegation,
    runs: Mapping[str, tuple[int, Mapping[str, Any]]] | None = None,
) -> StepState:
    runs = _runs(ledger, parent) if runs is None else runs
    child = d.scope(parent)
    info = ledger.session(child)
    if info is None:
        gone = {"code": "CHILD_MISSING", "message": "the child session is not in the ledger"}
        return StepState(d, "incomplete", "missing", error=gone)
    turns = info.requests
    made = tuple(receipts(ledger, child))
    if info.status == "finished":
        answer, entry = child_answer(ledger, child)
        return StepState(d, "finished", "finished", answer, entry, sha256_hex(answer), made, turns)
    newest = runs.get(d.child)
    if newest is None:
        return StepState(d, "unfinished", "not started", receipts=made, turns=turns)
    body = newest[1]
    if body["kind"] == ENDED:
        answer, entry = child_answer(ledger, child)
        error = body.get("error")
        return StepState(
            d,
            "incomplete",
            str(body.get("status")),
            answer,
            entry,
            sha256_hex(answer) if entry is not None else None,
            made,
            turns,
            error if isinstance(error, Mapping) else None,
        )
    return StepState(d, "unfinished", "interrupted", receipts=made, turns=turns)


def steps_of(
    ledger: LedgerBackend, parent: Scope, only: Sequence[Delegation] | None = None
) -> list[StepState]:
    runs = _runs(ledger, parent)
    chosen = delegations(ledger, parent) if only is None else list(only)
    return [step_state(ledger, parent, d, runs) for d in chosen]
