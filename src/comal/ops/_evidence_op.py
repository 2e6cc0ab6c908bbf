"""The ``EvidenceRead`` operation: exact pages of stored evidence (EVI-1..3).

It reads either a ledger entry (``entry=``: a tool result kept in the conversation) or a stored
output record (``record=``: what the write-time guard set aside). Both go through
:func:`comal.evidence.read_evidence`, imported when the operation runs, so the house works
before that module is installed; a record is presented to it as a tool-result entry whose
output digest is the one recorded when the output was stored, so every page is digest-checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import ComalError
from ..ledger import Entry, LedgerBackend, Scope, SessionInfo
from ..messages import Message
from ._errors import ToolFailure
from ._guard import find_output
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Operation

if TYPE_CHECKING:
    from ..evidence import EvidencePage

__all__ = ["EvidenceReadInput", "evidence_operation", "read_page"]

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


def read_page(ledger: LedgerBackend, scope: Scope, args: EvidenceReadInput) -> EvidencePage:
    """One page of what ``args`` names, an entry or a record, read the same way for the model
    and for ``comal evidence``; coded evidence errors (:mod:`comal.evidence`) as raised."""
    from ..evidence import read_evidence

    record = args.record is not None
    target = args.record if args.record is not None else args.entry
    assert target is not None
    return read_evidence(
        _RecordSource(ledger) if record else ledger,
        scope,
        target,
        field=args.field,
        offset=args.offset,
        limit=args.limit,
        search=args.search,
        regex=args.regex,
        expected_digest=args.expected_digest,
        session=args.session,
        target="record" if record else "entry",
    )


def _evidence_read(args: EvidenceReadInput, ctx: CallContext) -> ToolOutput:
    try:
        page = read_page(ctx.ledger, ctx.scope, args)
    except ImportError as exc:
        raise ToolFailure(
            f"EvidenceRead is unavailable here ({exc}); install comal.evidence"
        ) from exc
    except ComalError as exc:
        raise ToolFailure(str(exc)) from exc
    seen = {
        "sha256": page.digest,
        "offset": page.offset,
        "end": page.end,
        "total": page.total_utf16,
    }
    return ToolOutput(page.render(), observations=seen)


def evidence_operation() -> Operation:
    return Operation(
        "EvidenceRead",
        _DESCRIPTION,
        EvidenceReadInput,
        _evidence_read,
        effects=(Effect("read"),),
        inline_cap=LARGE_CAP,
    )
