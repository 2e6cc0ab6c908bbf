"""What a run hands back, rebuilt from ledger facts (RES-5).

The answer is the text of the session's last assistant message as stored — not a buffer of the
process that produced it — so a run that crashed after the model answered, or a finished session
that is merely reopened, gives the same answer without calling the model and without touching a
file. Receipts and usage are those the ledger holds for this run.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..ledger import LedgerBackend, Scope
from ..messages import Role, Text
from ..ops import Receipt

__all__ = [
    "DENIED_CODE",
    "RunResult",
    "RunStatus",
    "answer_of",
    "receipt_mark",
    "receipts_since",
    "run_usage",
]

RunStatus = Literal["finished", "max_turns", "budget_limited", "stopped", "denied", "error"]
DENIED_CODE = "CALLS_DENIED"
# Rules that refuse a call for what the model got wrong, not for what the operator forbids.
_MODEL_MISTAKES = ("contract:", "audience:")


@dataclass(frozen=True, slots=True)
class RunResult:
    """``status``: ``finished`` (finish_call passed; the session is closed), ``max_turns``
    (stopped at the cap; resume continues), ``budget_limited`` (the task's budget is spent;
    ``error`` says what remains, the board and the drafts are kept), ``error`` (a coded error
    stopped it, see ``error``); ``denied`` (set by :meth:`denying`): it finished, but calls
    were denied on the way. ``blocked`` are the calls left uncertain after a crash: never
    repeated on their own (RES-4)."""

    session: str
    status: RunStatus
    answer: str
    turns: int
    receipts: tuple[Receipt, ...] = ()
    usage: dict[str, int | None] = field(default_factory=dict)
    blocked: tuple[str, ...] = ()
    error: dict[str, str] | None = None

    @property
    def denied(self) -> tuple[Receipt, ...]:
        """The receipts of this run's calls the house denied by its policy (the mode, a rule,
        a hook, the sandbox, a person): work the run was asked for and did not do. A call
        refused by its contract (an unknown operation, arguments that do not fit, a human
        control) is the model's mistake, told to the model to fix, not a denial of the work."""
        return tuple(
            r
            for r in self.receipts
            if r.status == "denied"
            and not str(r.judgment.get("rule", "")).startswith(_MODEL_MISTAKES)
        )

    def denying(self) -> RunResult:
        """DRV-4: a run that finished with calls denied on the way, as a headless caller must
        report it: status ``denied``, a ``CALLS_DENIED`` error naming each denied call and the
        rule that denied it; any other result as it is."""
        denied = self.denied
        if self.status != "finished" or not denied:
            return self
        named = "; ".join(
            f"{r.operation} {r.call_id} (deny by {r.judgment.get('rule', '?')})" for r in denied
        )
        message = (
            f"the run ended but {len(denied)} call(s) were denied, so the task is not known to "
            f"be done: {named}. Allow them (--allow RULE, --mode trusted) and resume with "
            f"`comal --resume {self.session} -p`"
        )
        error = {"code": DENIED_CODE, "message": message}
        return replace(self, status="denied", error=error)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session": self.session,
            "status": self.status,
            "answer": self.answer,
            "turns": self.turns,
            "receipts": [r.as_dict() for r in self.receipts],
            "usage": dict(self.usage),
            "blocked": list(self.blocked),
        }
        if self.error is not None:
            out["error"] = dict(self.error)
        return out


def answer_of(ledger: LedgerBackend, scope: Scope) -> str:
    """The text of the session's last assistant message ("" when there is none)."""
    heads = ledger.heads(scope)
    last = next((h for h in reversed(heads) if h.role == Role.ASSISTANT.value), None)
    if last is None:
        return ""
    entry = ledger.entry(scope, last.id)
    if entry is None:
        return ""
    return "\n".join(p.text for p in entry.message.parts if isinstance(p, Text) and p.text)


def run_usage(ledger: LedgerBackend, scope: Scope, run: str) -> dict[str, int | None]:
    """Token usage of run ``run``: sums per TOK-1 field, ``None`` where nothing was reported
    (one aggregate query)."""
    return ledger.usage_totals(scope, run=run)


def receipts_since(ledger: LedgerBackend, scope: Scope, mark: int) -> tuple[Receipt, ...]:
    """The receipts recorded after record id ``mark`` (a range read, not the whole list)."""
    rows = ledger.records(scope, "receipt", since_id=mark)
    return tuple(Receipt.from_record(r) for r in rows)


def receipt_mark(ledger: LedgerBackend, scope: Scope) -> int:
    """The newest receipt's record id (one index read)."""
    return ledger.record_mark(scope, "receipt")
