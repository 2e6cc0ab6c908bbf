"""The ``session_search`` operation: the pipeline engine's recall tool (PIP-1, LED-5).

It searches the raw session in the ledger, not the assembled context: the query's words in
order, as written (a literal phrase: ``create-next-app`` or ``django.setup()`` are words to find,
never FTS5 syntax, which the model is not given), or a regular expression (RE2, ``regex=true``).
Like ``ctx_search`` it is bounded before it runs (the ledger's word limits) and while it runs
(``SEARCH_SECONDS``, cut off by the database), and says so with a coded error.

Every hit names the entry, its seq and role, a snippet, and the exact ``EvidenceRead`` call that
returns the whole field it matched in, digest-checked, so whatever a placeholder or a summary left
out comes back byte for byte. Only this session is searched (the ledger's reads are scoped, LED-2).
The model is offered it only while the pipeline engine runs (the agent's catalog hides it
otherwise); like every operation it is judged and receipted.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..ledger import Entry, SearchHit
from ..messages import Text, sha256_hex
from ..safe_text import one_line
from ._model import CallContext, Effect, ToolOutput
from ._operation import LARGE_CAP, Operation
from ._recall import bounded_search

__all__ = ["SessionSearchInput", "session_search_operation"]

_DESCRIPTION = (
    "Search this session's full history in the ledger (everything ever said, called or "
    "returned, including what the context now shows only as a placeholder or a summary). "
    "query is the text to find as written: a word, a name or a phrase (its words in this order; "
    "punctuation only separates words), or a regular expression (RE2) with regex=true. Each "
    "hit gives entry, seq, role, a snippet and the exact EvidenceRead call for the whole text."
)


class SessionSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(min_length=1, max_length=1_000, description="Text to find, or a regex.")
    regex: bool = Field(False, description="Treat query as a regular expression (RE2).")
    limit: int = Field(10, ge=1, le=50, description="At most this many hits.")


def _field(entry: Entry) -> tuple[str, str]:
    """The field a hit is read back from, and its exact text."""
    result = entry.message.tool_result
    if result is not None:
        return "content", result.text
    parts = entry.message.parts
    if any(isinstance(p, Text) for p in parts):
        return "text", "\n".join(p.text for p in parts if isinstance(p, Text))
    calls = entry.message.tool_calls
    if len(calls) == 1:
        return "arguments", calls[0].arguments
    return "arguments[0]", calls[0].arguments if calls else ""


def _search(args: SessionSearchInput, ctx: CallContext) -> list[SearchHit]:
    narrow = (
        "fix the pattern, or search text with regex=false"
        if args.regex
        else "search a shorter, more distinctive phrase"
    )
    with bounded_search(ctx, narrow):
        return ctx.ledger.search(ctx.scope, args.query, regex=args.regex, limit=args.limit)


def _session_search(args: SessionSearchInput, ctx: CallContext) -> ToolOutput:
    from ..evidence import evidence_call

    hits = _search(args, ctx)
    entries = {h.entry_id: ctx.ledger.entry(ctx.scope, h.entry_id) for h in hits}
    # The message proposing this very call names the words it searches for; it is no hit.
    hits = [
        h
        for h in hits
        if (e := entries[h.entry_id]) is not None
        and not any(c.id == ctx.call_id for c in e.message.tool_calls)
    ]
    how = "regex" if args.regex else "full-text"
    lines = [f"session_search {how} {args.query!r}: {len(hits)} hit(s) in this session."]
    found: list[dict[str, object]] = []
    for h in sorted(hits, key=lambda h: h.seq):
        entry = entries[h.entry_id]
        assert entry is not None
        field, text = _field(entry)
        digest = entry.output_digest if field == "content" and entry.output_digest else None
        call = evidence_call(entry.id, field, digest or sha256_hex(text))
        result = entry.message.tool_result
        tool = f" {one_line(result.name)}" if result is not None and result.name else ""
        # History's text on the hit's line, escaped: it can pose as no other line.
        snippet = one_line(h.snippet)
        lines.append(f"- seq {h.seq}, entry {h.entry_id}, {h.role}{tool}: {snippet}\n  {call}")
        found.append({"entry": h.entry_id, "seq": h.seq, "field": field})
    if not hits:
        lines.append("Nothing matched; try other words, fewer words, or regex=true.")
    return ToolOutput("\n".join(lines), observations={"hits": found})


def session_search_operation() -> Operation:
    return Operation(
        "session_search",
        _DESCRIPTION,
        SessionSearchInput,
        _session_search,
        effects=(Effect("read"),),
        inline_cap=LARGE_CAP,
    )
