"""The EvidenceRead operation's arguments, its call text, and a parser for that text.

:class:`EvidenceReadArgs` is shaped as an operation input (OPS-1): a pydantic model whose JSON
Schema the house registers. :func:`evidence_call` writes the exact call the model is shown
(``EvidenceRead(entry=12, field="content", expected_digest="…", offset=8000)``), extending
:func:`comal.messages.wire.evidence_read_call` with paging arguments so references, bounded-
message markers and ``next_call`` all use one spelling; :func:`parse_evidence_call` reads it back.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..messages import EvidenceRef
from ..messages.wire import evidence_read_call
from ._errors import EvidenceArgumentError

__all__ = [
    "EVIDENCE_READ_DESCRIPTION",
    "EVIDENCE_READ_NAME",
    "MAX_PAGE_UNITS",
    "EvidenceReadArgs",
    "Target",
    "evidence_call",
    "evidence_call_arguments",
    "parse_evidence_call",
]

EVIDENCE_READ_NAME = "EvidenceRead"
# What an EvidenceRead names: a ledger entry, or a stored output record (PIP-3).
Target = Literal["entry", "record"]
# EVI-2: a page is at most 8,000 UTF-16 units.
MAX_PAGE_UNITS = 8_000
EVIDENCE_READ_DESCRIPTION = (
    "Read stored output exactly, one page (at most 8,000 UTF-16 units) at a time. Offsets count "
    "UTF-16 code units. Give expected_digest from the reference to be sure the bytes are the "
    "ones it named; give search (text or, with regex=true, a pattern) to get every match offset "
    "and the page around the first match at or after offset. The reply ends with the exact "
    "call for the next page."
)


class EvidenceReadArgs(BaseModel):
    """Arguments of ``EvidenceRead`` (EVI-2); the JSON Schema is ``model_json_schema()``."""

    model_config = ConfigDict(extra="forbid", frozen=True, title=EVIDENCE_READ_NAME)

    entry: int = Field(ge=1, description="Ledger entry id from the reference.")
    field: str = Field(
        default="content",
        min_length=1,
        description='"content" (a tool output), "text" (a message\'s text) or "arguments".',
    )
    offset: int = Field(default=0, ge=0, description="First UTF-16 unit of the page.")
    limit: int = Field(
        default=MAX_PAGE_UNITS, ge=1, le=MAX_PAGE_UNITS, description="Page size in UTF-16 units."
    )
    search: str | None = Field(default=None, min_length=1, description="Text or pattern to find.")
    regex: bool = Field(default=False, description="Treat search as a Python regular expression.")
    expected_digest: str | None = Field(
        default=None, pattern="^[0-9a-f]{64}$", description="sha256 the reference named."
    )
    session: str | None = Field(
        default=None, min_length=1, description="A direct child session's id, for its evidence."
    )


def evidence_call(
    entry_id: int,
    field: str,
    digest: str | None,
    *,
    session: str | None = None,
    offset: int = 0,
    limit: int = MAX_PAGE_UNITS,
    search: str | None = None,
    regex: bool = False,
    target: Target = "entry",
) -> str:
    """The exact ``EvidenceRead(...)`` call text; defaults are left out. ``target`` says what
    ``entry_id`` numbers: a ledger entry, or a stored output ``record`` (the write-time guard's:
    it has one field, so none is named)."""
    if target == "record":
        base = f"{EVIDENCE_READ_NAME}(record={entry_id})"
        if digest is not None:
            base = f'{base[:-1]}, expected_digest="{digest}")'
        if session is not None:
            base = f"{base[:-1]}, session={json.dumps(session, ensure_ascii=False)})"
    elif digest is None:
        base = (
            f"{EVIDENCE_READ_NAME}(entry={entry_id}, field={json.dumps(field, ensure_ascii=False)})"
        )
        if session is not None:
            base = f"{base[:-1]}, session={json.dumps(session, ensure_ascii=False)})"
    else:
        ref = EvidenceRef(entry_id, field, digest, 0, 0, "", session)
        base = evidence_read_call(ref)
    extra: list[str] = []
    if offset:
        extra.append(f"offset={offset}")
    if limit != MAX_PAGE_UNITS:
        extra.append(f"limit={limit}")
    if search is not None:
        extra.append(f"search={json.dumps(search, ensure_ascii=False)}")
    if regex:
        extra.append("regex=true")
    return base if not extra else f"{base[:-1]}, {', '.join(extra)})"


_CALL = re.compile(rf"\s*{EVIDENCE_READ_NAME}\((?P<args>.*)\)\s*", re.DOTALL)
_ARG = re.compile(
    r'\s*(?P<name>\w+)\s*=\s*(?P<value>-?\d+|"(?:[^"\\]|\\.)*"|true|false|True|False)\s*(?:,|$)'
)


def parse_evidence_call(text: str) -> EvidenceReadArgs:
    """Read an ``EvidenceRead(...)`` call written by :func:`evidence_call` (or by a model)."""
    args = evidence_call_arguments(text)
    try:
        return EvidenceReadArgs(**args)
    except ValidationError as exc:
        raise EvidenceArgumentError(f"bad {EVIDENCE_READ_NAME} arguments: {exc}") from exc


def evidence_call_arguments(text: str) -> dict[str, Any]:
    """The arguments of an ``EvidenceRead(...)`` call's text, as written (not validated): the
    entry or record, field, offset, digest... whatever it names."""
    match = _CALL.fullmatch(text)
    if match is None:
        raise EvidenceArgumentError(
            f"not an {EVIDENCE_READ_NAME}(...) call: {text[:80]!r}; copy the call exactly"
        )
    args: dict[str, Any] = {}
    rest = match["args"]
    pos = 0
    while pos < len(rest) and rest[pos:].strip():
        arg = _ARG.match(rest, pos)
        if arg is None:
            raise EvidenceArgumentError(
                f"cannot read the arguments at {rest[pos : pos + 40]!r}; "
                "write them as name=value, strings in double quotes"
            )
        raw = arg["value"]
        args[arg["name"]] = (
            raw.lower() == "true"
            if raw in ("true", "false", "True", "False")
            else (json.loads(raw))
        )
        pos = arg.end()
    return args
