"""``WorkDraft`` (WRK-4): a deliverable composed from child results by reference.

A draft is stored once, as an event of the coordinator's session (kind ``work_draft``)::

    {"v": 1, "call_id", "title", "version", "sha256", "chars",
     "parts": [{"text": …} | {"n", "child", "entry", "sha256", "chars"}]}

A reference part names a direct child's entry (by default the step's answer) and the sha256 of
its text; the coordinator's own words are the only text the record holds. :func:`render_draft`
reads each referenced entry from the child's session (EVI-3: direct children only), checks its
digest and joins the parts, so the draft is rebuilt byte for byte on every read, and a call
judged again after a crash finds its record and writes no second one: no fragment is ever
copied twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..ledger import LedgerBackend, Scope
from ..messages import Text, sha256_hex
from ..ops import CallContext, Effect, Operation, Surface, ToolOutput
from ._errors import DraftReferenceError
from ._steps import delegations, step_state

__all__ = ["DRAFT", "Draft", "draft_operation", "drafts_of", "render_draft"]

DRAFT = "work_draft"
_MODEL: frozenset[Surface] = frozenset({"model"})


class DraftPart(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: Annotated[str, Field(min_length=1, max_length=20_000)] | None = Field(
        None, description="Your own words, as they are."
    )
    step: int | None = Field(None, ge=1, description="A finished work step's number (#n).")
    entry: int | None = Field(
        None, ge=1, description="An entry of that step's child; default: its final answer."
    )

    @model_validator(mode="after")
    def _one(self) -> DraftPart:
        if (self.text is None) == (self.step is None) or (self.entry and self.step is None):
            raise ValueError("give either text, or step (with an optional entry)")
        return self


class WorkDraftInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str = Field(min_length=1, max_length=200, description="The deliverable's title.")
    parts: list[DraftPart] = Field(min_length=1, max_length=50)


@dataclass(frozen=True, slots=True)
class Draft:
    record: int
    call_id: str
    title: str
    version: int
    sha256: str
    chars: int
    parts: tuple[Mapping[str, Any], ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "call_id": self.call_id,
            "title": self.title,
            "version": self.version,
            "sha256": self.sha256,
            "chars": self.chars,
            "parts": [dict(p) for p in self.parts],
        }


def drafts_of(ledger: LedgerBackend, scope: Scope) -> list[Draft]:
    out = []
    for rec in ledger.records(scope, "event", kinds=(DRAFT,)):
        b = rec.body
        out.append(
            Draft(
                rec.id,
                str(b["call_id"]),
                str(b["title"]),
                int(b["version"]),
                str(b["sha256"]),
                int(b["chars"]),
                tuple(b.get("parts") or ()),
            )
        )
    return out


def _entry_text(ledger: LedgerBackend, parent: Scope, child: str, entry_id: int) -> str:
    kids = {c.id: c for c in ledger.children(parent)}
    info = kids.get(child)
    if info is None:
        raise DraftReferenceError(
            f"session {child} is not a direct child of {parent.session}: a draft rests only on "
            "this session's own work steps"
        )
    entry = ledger.entry(info.scope, entry_id)
    if entry is None:
        raise DraftReferenceError(f"child {child} has no entry {entry_id}")
    result = entry.message.tool_result
    if result is not None:
        return result.text
    return "\n".join(p.text for p in entry.message.parts if isinstance(p, Text) and p.text)


def render_parts(ledger: LedgerBackend, scope: Scope, parts: tuple[Mapping[str, Any], ...]) -> str:
    texts = []
    for part in parts:
        if "text" in part:
            texts.append(str(part["text"]))
            continue
        text = _entry_text(ledger, scope, str(part["child"]), int(part["entry"]))
        if sha256_hex(text) != part["sha256"]:
            raise DraftReferenceError(
                f"entry {part['entry']} of child {part['child']} no longer hashes to "
                f"{part['sha256']}; run `comal verify`"
            )
        texts.append(text)
    return "\n\n".join(texts)


def render_draft(ledger: LedgerBackend, scope: Scope, draft: Draft) -> str:
    """The draft's text, rebuilt from its references (digests checked)."""
    text = f"# {draft.title}\n\n" + render_parts(ledger, scope, draft.parts)
    if sha256_hex(text) != draft.sha256:
        raise DraftReferenceError(
            f"draft {draft.record} renders to other bytes than it was stored with; run "
            "`comal verify`"
        )
    return text


def _resolve(args: WorkDraftInput, ctx: CallContext) -> list[dict[str, Any]]:
    steps = {d.n: d for d in delegations(ctx.ledger, ctx.scope)}
    parts: list[dict[str, Any]] = []
    for part in args.parts:
        if part.text is not None:
            parts.append({"text": part.text})
            continue
        assert part.step is not None
        d = steps.get(part.step)
        if d is None:
            raise DraftReferenceError(f"there is no work step #{part.step} in this session")
        state = step_state(ctx.ledger, ctx.scope, d)
        if state.outcome != "finished":
            raise DraftReferenceError(
                f"work step #{d.n} is {state.outcome} ({state.status}): a draft rests on "
                "finished steps only; wait for it (WorkStepWait) or delegate it again"
            )
        entry = part.entry if part.entry is not None else state.answer_entry
        if entry is None:
            raise DraftReferenceError(f"work step #{d.n} has no answer to compose from")
        text = _entry_text(ctx.ledger, ctx.scope, d.child, entry)
        ref = {"n": d.n, "child": d.child, "entry": entry, "sha256": sha256_hex(text)}
        parts.append(ref | {"chars": len(text)})
    return parts


def _draft(args: WorkDraftInput, ctx: CallContext) -> ToolOutput:
    mine = drafts_of(ctx.ledger, ctx.scope)
    found = next((d for d in mine if d.call_id == ctx.call_id), None)
    if found is None:
        parts = _resolve(args, ctx)
        text = f"# {args.title}\n\n" + render_parts(ctx.ledger, ctx.scope, tuple(parts))
        version = 1 + sum(d.title == args.title for d in mine)
        body = {
            "v": 1,
            "call_id": ctx.call_id,
            "title": args.title,
            "version": version,
            "sha256": sha256_hex(text),
            "chars": len(text),
            "parts": parts,
        }
        rec = ctx.ledger.add_record(ctx.scope, "event", DRAFT, body)
        found = next(d for d in drafts_of(ctx.ledger, ctx.scope) if d.record == rec.id)
    text = render_draft(ctx.ledger, ctx.scope, found)
    refs = [f"step #{p['n']} entry {p['entry']}" for p in found.parts if "n" in p]
    head = (
        f'[draft "{found.title}" v{found.version}: record {found.record}, sha256 '
        f"{found.sha256}, {found.chars:,} characters; by reference: {', '.join(refs) or 'none'}]"
    )
    seen = {"draft": found.record, "sha256": found.sha256, "version": found.version}
    return ToolOutput(f"{head}\n\n{text}", observations=seen)


def draft_operation() -> Operation:
    return Operation(
        "WorkDraft",
        "Compose a deliverable from finished work steps by reference: parts are your own text "
        "or a step's answer (or one of its child's entries), joined in order. The draft is "
        "stored once and rebuilt from its references; a new call with the same title makes "
        "its next version.",
        WorkDraftInput,
        _draft,
        effects=(Effect("read"),),
        audience="model",
        surfaces=_MODEL,
    )
