"""Receipts (OPS-3..5, EVI-4): one per judged proposal, written to the ledger as a record.

A receipt says who proposed what (operation, actor, call id, digest of the exact argument text),
how it was judged (decision and deciding rule, approval), when it ran, its status, the digest and
size of the output the handler returned, what was observed, and its disposition:

- ``serve``: the result is the observation of this call (ok, error, postcondition observed);
- ``repeat``: nothing with effects ran (denied, a read-only call that timed out or was
  interrupted, a call the interruption came before, or a native write proven
  ``not_applied`` after a crash), so the same call may run again;
- ``basket``: set aside; the effects are uncertain and a repeat needs inspection and a new
  proposal. There is never an automatic replay and never an implicit rollback (OPS-4).

A receipt holds digests, sizes and observations, never output bytes, so it cannot contain bytes
the tool did not return (EVI-4). Body schema version :data:`RECEIPT_SCHEMA`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._labels import judgment_label
from ..ledger import LedgerBackend, Record, Scope
from ._model import READ_ONLY_EFFECTS, Actor, Disposition, Effect, Status, Surface

__all__ = [
    "RECEIPT_SCHEMA",
    "OutputInfo",
    "Receipt",
    "RetryVerdict",
    "disposition_for",
    "may_retry",
    "receipts",
]

RECEIPT_SCHEMA = 1


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """Digest and size of the handler's whole output (UTF-8 bytes), and where it is stored when
    it was over the inline cap."""

    sha256: str
    size: int
    chars: int
    stored: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "size": self.size,
            "chars": self.chars,
            "stored": self.stored,
        }


def disposition_for(status: Status, effects: tuple[Effect, ...]) -> Disposition:
    if status in ("ok", "error", "postcondition_observed"):
        return "serve"
    read_only = all(e.kind in READ_ONLY_EFFECTS for e in effects)
    stopped = status in ("timeout", "interrupted")
    if status in ("denied", "not_applied") or (stopped and read_only):
        return "repeat"
    return "basket"


@dataclass(frozen=True, slots=True)
class Receipt:
    operation: str
    call_id: str
    actor: Actor
    surface: Surface
    arguments_digest: str
    judgment: Mapping[str, Any]
    status: Status
    disposition: Disposition
    started_at: str | None = None
    ended_at: str | None = None
    output: OutputInfo | None = None
    observations: Mapping[str, Any] = field(default_factory=dict)
    effects: tuple[Effect, ...] = ()
    preparation: int | None = None
    result_entry: int | None = None
    # Storage ids: where the receipt itself was found; not part of the body.
    record_id: int | None = None
    created_at: str | None = None

    def to_body(self) -> dict[str, Any]:
        return {
            "v": RECEIPT_SCHEMA,
            "operation": self.operation,
            "call_id": self.call_id,
            "actor": self.actor.as_dict(),
            "surface": self.surface,
            "arguments_digest": self.arguments_digest,
            "judgment": dict(self.judgment),
            "status": self.status,
            "disposition": self.disposition,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "output": self.output.as_dict() if self.output is not None else None,
            "observations": dict(self.observations),
            "effects": [e.as_dict() for e in self.effects],
            "preparation": self.preparation,
            "result_entry": self.result_entry,
        }

    @classmethod
    def from_record(cls, rec: Record) -> Receipt:
        b = rec.body
        out = b.get("output")
        return cls(
            operation=b["operation"],
            call_id=b["call_id"],
            actor=Actor.from_dict(b["actor"]),
            surface=b["surface"],
            arguments_digest=b["arguments_digest"],
            judgment=b["judgment"],
            status=b["status"],
            disposition=b["disposition"],
            started_at=b.get("started_at"),
            ended_at=b.get("ended_at"),
            output=OutputInfo(out["sha256"], out["size"], out["chars"], out.get("stored"))
            if out
            else None,
            observations=b.get("observations", {}),
            effects=tuple(Effect.from_dict(e) for e in b.get("effects", ())),
            preparation=b.get("preparation"),
            result_entry=b.get("result_entry"),
            record_id=rec.id,
            created_at=rec.created_at,
        )

    @property
    def label(self) -> str:
        """How its judgment reads to a person (:func:`comal.ops.judgment_label`)."""
        return judgment_label(self.judgment)

    def as_dict(self) -> dict[str, Any]:
        """The body plus where it is stored and its label (for ``comal receipts --json`` and
        the web page); neither is part of the stored body."""
        return {
            "record": self.record_id,
            "created_at": self.created_at,
            **self.to_body(),
            "label": self.label,
        }


def receipts(ledger: LedgerBackend, scope: Scope) -> list[Receipt]:
    return [Receipt.from_record(r) for r in ledger.records(scope, "receipt")]


@dataclass(frozen=True, slots=True)
class RetryVerdict:
    allowed: bool
    reason: str

    def __bool__(self) -> bool:
        return self.allowed


def may_retry(ledger: LedgerBackend, scope: Scope, call_id: str) -> RetryVerdict:
    """May the house repeat call ``call_id`` on its own (RES-4)? A new proposal is always
    judged afresh; this answers only for automatic insistence on this very call."""
    found = [r for r in receipts(ledger, scope) if r.call_id == call_id]
    prepared = [p for p in ledger.records(scope, "preparation") if p.body.get("call_id") == call_id]
    # A call proven not_applied may be prepared again: only a preparation without a receipt of
    # its own says "it may have run".
    receipted = {r.preparation for r in found}
    open_preps = [p for p in prepared if p.id not in receipted]
    if open_preps:
        return RetryVerdict(
            False,
            f"{call_id} was prepared (record {open_preps[-1].id}) and has no receipt: it may "
            "have run. Run reconcile, inspect, and make a new proposal",
        )
    if not found:
        return RetryVerdict(
            True, f"{call_id} has no preparation and no receipt: this house never started it"
        )
    last = found[-1]
    if all(e.kind in READ_ONLY_EFFECTS for e in last.effects) and last.status != "uncertain":
        return RetryVerdict(True, f"{last.operation} only reads: repeating it changes nothing")
    if last.status == "not_applied":
        return RetryVerdict(
            True,
            f"{call_id} was prepared but its write never landed (the file still has its content "
            "from before); it may run again after a fresh judgment",
        )
    if last.disposition == "repeat":
        return RetryVerdict(True, f"{call_id} was {last.status}: nothing with effects ran")
    if last.disposition == "serve":
        return RetryVerdict(
            False,
            f"{call_id} finished ({last.status}); its result is served, and repeating it would "
            "repeat its effects. Inspect and make a new proposal",
        )
    why = last.observations.get("reason") or f"its status is {last.status}"
    return RetryVerdict(
        False,
        f"{call_id} is uncertain ({why}); it is blocked from automatic repetition: inspect the "
        "effects and make a new proposal",
    )
