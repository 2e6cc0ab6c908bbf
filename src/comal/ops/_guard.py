"""The write-time output guard (PIP-3) and the stored outputs it leaves (EVI-1).

An output longer than its operation's inline cap (8,000 characters; 15,000 for file reads, MCP
tools and evidence pages; never more than 100,000) is stored whole, exactly as the handler
returned it, as its own ledger record: table ``event``, kind ``output``, body
``{"v", "call_id", "operation", "content", "sha256", "size", "size_utf16", "chars"}``. The record
sits beside the conversation rather than in it, so the step stays one call and one result, and
the inline result holds the head and the tail around a notice naming the record id, the sha256,
the size and the exact ``EvidenceRead(record=…)`` call that pages through the rest.

:func:`read_output` returns the stored text only if it still hashes to its recorded sha256.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import LedgerIntegrityError, UserError
from ..ledger import LedgerBackend, Record, Scope
from ..messages import sha256_hex
from ._operation import HARD_CAP

__all__ = ["OUTPUT_KIND", "StoredOutput", "find_output", "guard_output", "read_output"]

OUTPUT_KIND = "output"


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, slots=True)
class StoredOutput:
    """The exact reference to a stored output (LED-6)."""

    record: int
    sha256: str
    size: int
    size_utf16: int
    chars: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "sha256": self.sha256,
            "size": self.size,
            "size_utf16": self.size_utf16,
            "chars": self.chars,
        }


def _notice(stored: StoredOutput, head: str, tail_chars: int) -> str:
    offset = utf16_len(head)
    return (
        f"\n[output truncated at write time: {stored.chars:,} characters ({stored.size:,} bytes)"
        f" in all; shown: the first {len(head):,} and the last {tail_chars:,}. The whole output"
        f" is stored exactly as ledger record {stored.record}, sha256 {stored.sha256}. Read the"
        f' rest exactly: EvidenceRead(record={stored.record}, expected_digest="{stored.sha256}",'
        f" offset={offset})]\n"
    )


def guard_output(
    ledger: LedgerBackend,
    scope: Scope,
    *,
    call_id: str,
    operation: str,
    text: str,
    cap: int,
) -> tuple[str, StoredOutput | None]:
    """The inline text for ``text`` under ``cap``, storing the whole when it is over."""
    cap = min(cap, HARD_CAP)
    if len(text) <= cap:
        return text, None
    size = len(text.encode("utf-8", "surrogatepass"))
    digest = sha256_hex(text)
    units = utf16_len(text)
    body: dict[str, Any] = {
        "v": 1,
        "call_id": call_id,
        "operation": operation,
        "content": text,
        "sha256": digest,
        "size": size,
        "size_utf16": units,
        "chars": len(text),
    }
    record = ledger.add_record(scope, "event", OUTPUT_KIND, body)
    stored = StoredOutput(record.id, digest, size, units, len(text))
    # Size the notice with the widest numbers it can hold, then split what is left 2:1.
    room = cap - len(_notice(stored, "x" * cap, cap))
    head_chars = max(0, room * 2 // 3)
    tail_chars = max(0, room - head_chars)
    head = text[:head_chars]
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    return head + _notice(stored, head, tail_chars) + tail, stored


def find_output(ledger: LedgerBackend, scope: Scope, record_id: int) -> Record | None:
    """The stored-output record ``record_id`` of this session, if there is one."""
    rec = ledger.record(scope, "event", record_id)
    return rec if rec is not None and rec.kind == OUTPUT_KIND else None


def read_output(
    ledger: LedgerBackend, scope: Scope, record_id: int, *, expected_digest: str | None = None
) -> str:
    """The exact stored output; raises if it is missing or fails its digest."""
    rec = find_output(ledger, scope, record_id)
    if rec is None:
        raise UserError(
            f"no stored output record {record_id} in session {scope.session}; "
            "copy the record id from the reference exactly"
        )
    text = rec.body["content"]
    digest = sha256_hex(text)
    if digest != rec.body["sha256"]:
        raise LedgerIntegrityError(
            f"stored output {record_id} hashes to {digest}, not its recorded {rec.body['sha256']};"
            " the ledger is damaged: run `comal verify`"
        )
    if expected_digest is not None and expected_digest != digest:
        raise LedgerIntegrityError(
            f"stored output {record_id} has sha256 {digest}, not the expected {expected_digest}"
        )
    return str(text)
