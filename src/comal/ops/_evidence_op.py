"""The ``EvidenceRead`` operation: exact pages of stored evidence (EVI-1..3).

It reads either a ledger entry (``entry=``: a tool result kept in the conversation) or a stored
output record (``record=``: what the write-time guard set aside). Both go through
:func:`comal.evidence.read_evidence`, imported when the operation runs, so the house works
before that module is installed; a record is presented to it as a tool-result entry whose
output digest is the one recorded when the output was stored, so every page is digest-checked.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import ComalError
from ..ledger import Entry, LedgerBackend, Scope, SessionInfo
from ..messages import Message
from ._errors import ToolFailure
from ._guard import find_output
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Operation

__all__ = ["EvidenceReadInput", "evidence_operation"]

_MAX_PAGE = 8_000
_DESCRIPTION = (
    "Read stored output exactly, one page (at most 8,000 UTF-16 units) at a time. Give entry "
    "(a ledger entry) or record (a stored output record) from the reference, and "
    "expected_digest to be sure the bytes are the ones it named. Offsets count UTF-16 code "
    "units; search (text, or a pattern with regex=true) finds every match. The reply ends with "
    "the exact call for the next page."
)


class EvidenceReadInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    entry: int | None = Field(None, ge=1, description="Ledger entry id from the reference.")
    record: int | None = Field(None, ge=1, description="Stored output record id.")
    field: str = Field("content", min_length=1, description='"content", "text" or "arguments".')
    offset: int = Field(0, ge=0, description="First UTF-16 unit of the page.")
    limit: int = Field(_MAX_PAGE, ge=1, le=_MAX_PAGE, description="Page size in UTF-16 units.")
    search: str | None = Field(None, min_length=1, description="Text or pattern to find.")
    regex: bool = Field(
        False,
        description="Treat search as a regular expression (RE2: linear time, no "
        "backreferences or lookaround).",
    )
    expected_digest: str | None = Field(
        None, pattern="^[0-9a-f]{64}$", description="sha256 the reference named."
    )
    session: str | None = Field(
        None, min_length=1, description="A direct child session's id, for its evidence."
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.entry is None) == (self.record is None):
            raise ValueError("give exactly one of entry and record")
        return self


class _RecordSource:
    """Stored-output records seen as tool-result entries, for ``read_evidence``."""

    def __init__(self, ledger: LedgerBackend) -> None:
        self._ledger = ledger

    def entry(self, scope: Scope, entry_id: int) -> Entry | None:
        rec = find_output(self._ledger, scope, entry_id)
        if rec is None:
            return None
        body: dict[str, Any] = rec.body
        message = Message.tool(str(body["call_id"]), str(body["content"]))
        return Entry(
            rec.id,
            rec.session,
            -1,
            -1,
            "tool",
            0,
            int(body["size"]),
            rec.created_at,
            rec.digest,
            str(body["sha256"]),
            message,
        )

    def children(self, scope: Scope) -> list[SessionInfo]:
        return self._ledger.children(scope)


def _evidence_read(args: EvidenceReadInput, ctx: CallContext) -> ToolOutput:
    try:
        from ..evidence import read_evidence
    except ImportError as exc:
        raise ToolFailure(
            f"EvidenceRead is unavailable here ({exc}); install comal.evidence"
        ) from exc
    target = args.record if args.record is not None else args.entry
    assert target is not None
    try:
        page = read_evidence(
            _RecordSource(ctx.ledger) if args.record is not None else ctx.ledger,
            ctx.scope,
            target,
            field=args.field,
            offset=args.offset,
            limit=args.limit,
            search=args.search,
            regex=args.regex,
            expected_digest=args.expected_digest,
            session=args.session,
        )
    except ComalError as exc:
        raise ToolFailure(str(exc)) from exc
    text = page.render()
    if args.record is not None:
        # The reader speaks of entries; a record's pages must name the record to be followed.
        text = text.replace("EvidenceRead(entry=", "EvidenceRead(record=").replace(
            "[EvidenceRead entry ", "[EvidenceRead record ", 1
        )
    seen = {
        "sha256": page.digest,
        "offset": page.offset,
        "end": page.end,
        "total": page.total_utf16,
    }
    return ToolOutput(text, observations=seen)


def evidence_operation() -> Operation:
    return Operation(
        "EvidenceRead",
        _DESCRIPTION,
        EvidenceReadInput,
        _evidence_read,
        effects=(Effect("read"),),
        inline_cap=LARGE_CAP,
    )
