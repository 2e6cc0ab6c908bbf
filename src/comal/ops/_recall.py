"""The dag engine's recall tools: ``ctx_search``, ``ctx_inspect``, ``ctx_expand`` (DAG-7).

Operations of the house's registry like any other (judged, receipted), read-only and
session-local: they read the calling session only, never its children or another session, and
are not on the ``api`` surface (never exported). The model is offered them only while the dag
engine runs (``model_catalog`` hides them under any other engine).

``ctx_search`` reads its query as text, never as syntax: ``words`` (any of them, ranked) or
``phrase`` (these words in this order), or a regex (RE2). The model gets no FTS5 mode: what it
searches for is text it read (``create-next-app``, ``django.setup()``), which FTS5 would read as
operators and column names, and prefix and OR expansions are where a query's cost runs away.
Every search is bounded before it runs (the ledger's word limits) and while it runs
(:data:`SEARCH_SECONDS`, cut off by the database): over either, the tool answers with a coded
error and the model narrows the query.

``ctx_expand`` returns a summary's sources (its entries for a leaf, its children for a condensed
node, rendered as the summarizer read them) or one entry, paged like EvidenceRead: offsets in
UTF-16 units, pages of at most 8,000 units that never cut a surrogate pair, the exact
``next_call``, and a digest check: the whole text must hash to the ``sources_digest`` the
summary row recorded (else the ledger is damaged) and to ``expected_digest`` when given.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import ComalError
from ..ledger import LedgerBackend, LedgerTimeout, Scope, SummaryRecord
from ..messages import sha256_hex
from ..safe_text import one_line
from ._errors import OperationTimeout, ToolFailure
from ._model import CallContext, Effect, Surface, ToolOutput
from ._operation import LARGE_CAP, Operation

__all__ = [
    "SEARCH_SECONDS",
    "CtxExpandInput",
    "CtxInspectInput",
    "CtxSearchInput",
    "expand_text",
    "recall_operations",
]

_MAX_PAGE = 8_000
_SURFACES: frozenset[Surface] = frozenset({"model", "cli", "tui"})
# What one recall search may take, less where the operator's timeout for the operation is shorter:
# the plain queries take milliseconds; a search is cut off long before it could stall a turn.
SEARCH_SECONDS = 5.0


@contextmanager
def bounded_search(ctx: CallContext, narrow: str) -> Iterator[None]:
    """The call's ledger work bounded in time (:data:`SEARCH_SECONDS`); a refused or stopped
    search leaves as the tool's error, with its code and ``narrow`` (what to do instead)."""
    seconds = min(ctx.timeout, SEARCH_SECONDS) if ctx.timeout > 0 else SEARCH_SECONDS
    try:
        with ctx.ledger.bounded(seconds):
            yield
    except ToolFailure:
        raise
    except LedgerTimeout as exc:
        raise OperationTimeout(
            f"[{exc.code}] the search ran past its {seconds:g} s bound and was stopped; {narrow}"
        ) from exc
    except ComalError as exc:
        raise ToolFailure(f"[{exc.code}] {exc}; {narrow}") from exc


class CtxSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str = Field(
        ..., min_length=1, max_length=1_000, description="Text to find (as written), or a regex."
    )
    mode: Literal["words", "phrase", "regex"] = Field(
        "words",
        description="words: any of the query's words, ranked (BM25); phrase: its words in this "
        "order; regex: a regular expression (RE2). Punctuation only separates words.",
    )
    kind: Literal["all", "messages", "summaries"] = Field("all", description="What to search.")
    limit: int = Field(10, ge=1, le=50, description="Most results.")
    within: int | None = Field(
        None,
        description="A summary id (from its header): search only the messages it stands for, "
        "their calls' arguments included; an exact match of the query (a path, an id, a "
        "number, a command) ranks first. For an exact value a summary left out.",
    )


class CtxInspectInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: int = Field(..., description="Summary id from its header.")


class CtxExpandInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    summary: int | None = Field(None, description="Summary id: returns its sources.")
    entry: int | None = Field(None, ge=1, description="Entry id: returns that message.")
    offset: int = Field(0, ge=0, description="First UTF-16 unit of the page.")
    limit: int = Field(_MAX_PAGE, ge=1, le=_MAX_PAGE, description="Page size in UTF-16 units.")
    expected_digest: str | None = Field(
        None, pattern="^[0-9a-f]{64}$", description="sha256 of the whole text, from a page."
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        if (self.summary is None) == (self.entry is None):
            raise ValueError("give exactly one of summary and entry")
        return self


def _summary(ledger: LedgerBackend, scope: Scope, summary_id: int) -> SummaryRecord:
    found = ledger.summary(scope, summary_id)
    if found is None:
        raise ToolFailure(
            f"no summary {summary_id} in this session; copy the id from a summary's header"
        )
    return found


def expand_text(ledger: LedgerBackend, scope: Scope, summary: SummaryRecord) -> str:
    """The sources of ``summary`` as its summarizer read them, checked against the row."""
    from ..context.dag import render_children, render_entries

    if summary.kind == "leaf":
        entries = ledger.entries(scope, start_seq=summary.first_seq, end_seq=summary.last_seq)
        text = render_entries(entries)
    else:
        children = [ledger.summary(scope, i) for i in summary.children]
        text = render_children([c for c in children if c is not None])
    if summary.sources_digest and sha256_hex(text) != summary.sources_digest:
        raise ToolFailure(
            f"summary {summary.id}'s sources hash to {sha256_hex(text)}, not the recorded "
            f"{summary.sources_digest}; the ledger is damaged: run `comal verify`"
        )
    return text


def _search_within(args: CtxSearchInput, ctx: CallContext, within: int) -> ToolOutput:
    """ENG-4: the entries one summary stands for, exact text first, each hit showing it."""
    from ..context import search_within

    if args.mode == "regex":
        raise ToolFailure("within= searches text as written, not a regex; drop mode or within")
    s = _summary(ctx.ledger, ctx.scope, within)
    entries = ctx.ledger.entries(ctx.scope, start_seq=s.first_seq, end_seq=s.last_seq)
    hits = search_within(entries, args.query, args.limit)
    what = f"in summary {s.id} (seq {s.first_seq}..{s.last_seq})"
    if not hits:
        return ToolOutput(f"[ctx_search: no match for {args.query!r} {what}]")
    lines = [f"[ctx_search: {len(hits)} results for {args.query!r} {what}, exact first]"]
    for n, h in enumerate(hits, start=1):
        e = h.entry
        how = "exact" if h.exact else f"words {h.score:.2f}"
        lines.append(
            f"{n}. entry {e.id} (seq {e.seq}, {e.role}), {how}: {h.snippet} — "
            f"ctx_expand(entry={e.id})"
        )
    seen = {"hits": [{"kind": "entry", "id": h.entry.id} for h in hits], "within": s.id}
    return ToolOutput("\n".join(lines), observations=seen)


def _search(args: CtxSearchInput, ctx: CallContext) -> ToolOutput:
    if args.within is not None:
        return _search_within(args, ctx, args.within)
    narrow = "search fewer, more distinctive words (or a phrase), or fix the regex"
    with bounded_search(ctx, narrow):
        hits = ctx.ledger.recall_search(
            ctx.scope,
            args.query,
            mode=args.mode,
            limit=args.limit,
            entries=args.kind != "summaries",
            summaries=args.kind != "messages",
        )
    # The message proposing this very call names the words it searches for; it is no hit.
    hits = [h for h in hits if h.kind != "entry" or not _proposes(ctx, h.id)]
    if not hits:
        return ToolOutput(f"[ctx_search: no match for {args.query!r} in this session]")
    lines = [f"[ctx_search: {len(hits)} results for {args.query!r}, best first]"]
    for n, h in enumerate(hits, start=1):
        if h.kind == "summary":
            where = f"summary {h.id} (depth {h.depth}, seq {h.seq}..{h.last_seq})"
            call = f"ctx_expand(summary={h.id})"
        else:
            where = f"entry {h.id} (seq {h.seq}, {h.role})"
            call = f"ctx_expand(entry={h.id})"
        # History's text on the result's line, escaped: it can pose as no other result.
        lines.append(f"{n}. {where}, score {h.score:.3f}: {one_line(h.snippet)} — {call}")
    seen = {"hits": [{"kind": h.kind, "id": h.id} for h in hits]}
    return ToolOutput("\n".join(lines), observations=seen)


def _proposes(ctx: CallContext, entry_id: int) -> bool:
    entry = ctx.ledger.entry(ctx.scope, entry_id)
    return entry is not None and any(c.id == ctx.call_id for c in entry.message.tool_calls)


def _inspect(args: CtxInspectInput, ctx: CallContext) -> ToolOutput:
    s = _summary(ctx.ledger, ctx.scope, args.summary)
    info = {
        "id": s.id,
        "depth": s.depth,
        "kind": s.kind,
        "covers_seq": [s.first_seq, s.last_seq],
        "descendant_count": s.descendant_count,
        "descendant_tokens": s.descendant_tokens,
        "children": list(s.children),
        "parent": ctx.ledger.summary_parent(ctx.scope, s.id),
        "time_range": list(s.time_range),
        "tokens": s.tokens,
        "summarizer": s.summarizer,
        "level": s.level,
        "digest": s.digest,
        "sources_digest": s.sources_digest,
        "expand": f"ctx_expand(summary={s.id})",
    }
    return ToolOutput(json.dumps(info, ensure_ascii=False, indent=1), observations={"id": s.id})


def _call(target: str, offset: int, digest: str) -> str:
    return f'ctx_expand({target}, offset={offset}, expected_digest="{digest}")'


def _expand(args: CtxExpandInput, ctx: CallContext) -> ToolOutput:
    from ..evidence._utf16 import is_pair_split, utf16_encode

    if args.summary is not None:
        target = f"summary={args.summary}"
        text = expand_text(ctx.ledger, ctx.scope, _summary(ctx.ledger, ctx.scope, args.summary))
    else:
        from ..context.dag import render_entries

        assert args.entry is not None
        entry = ctx.ledger.entry(ctx.scope, args.entry)
        if entry is None:
            raise ToolFailure(f"no entry {args.entry} in this session; copy the id exactly")
        target = f"entry={args.entry}"
        text = render_entries([entry])
    digest = sha256_hex(text)
    if args.expected_digest is not None and args.expected_digest != digest:
        raise ToolFailure(
            f"{target} has sha256 {digest}, not the expected {args.expected_digest}; nothing "
            "was read. Start again without expected_digest"
        )
    data = utf16_encode(text)
    total = len(data) // 2
    if args.offset > total:
        raise ToolFailure(f"offset {args.offset} is past the end ({total} UTF-16 units)")
    start = args.offset - 1 if is_pair_split(data, args.offset) else args.offset
    end = min(start + args.limit, total)
    if is_pair_split(data, end):
        end = end - 1 if end - 1 > start else end + 1
    page = data[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")
    head = f"[ctx_expand {target}: UTF-16 units {start}..{end} of {total}, sha256 {digest}]"
    following = _call(target, end, digest) if end < total else None
    tail = f"[next page: {following}]" if following else "[end of the sources]"
    ctx.ledger.add_record(
        ctx.scope, "event", "dag_expanded", {"v": 1, "target": target, "offset": start}
    )
    seen = {"sha256": digest, "offset": start, "end": end, "total": total}
    return ToolOutput(f"{head}\n{page}\n{tail}", observations=seen)


def recall_operations() -> list[Operation]:
    """ctx_search, ctx_inspect and ctx_expand."""
    return [
        Operation(
            "ctx_search",
            "Search this session's messages and summaries for text (any of its words ranked by "
            "BM25, or an exact phrase) or a regex; each result names the entry or summary and "
            "the ctx_expand call that returns it exactly. With within=SUMMARY_ID it searches "
            "only what that summary stands for, an exact match first: the way to an exact "
            "path, id, number or command the summary left out.",
            CtxSearchInput,
            _search,
            effects=(Effect("read"),),
            surfaces=_SURFACES,
        ),
        Operation(
            "ctx_inspect",
            "Show a summary's coverage: depth, the seq range and time range it stands for, how "
            "many messages, its children and parent, tokens, and who made it.",
            CtxInspectInput,
            _inspect,
            effects=(Effect("read"),),
            surfaces=_SURFACES,
        ),
        Operation(
            "ctx_expand",
            "Return exactly what a summary stands for (its messages, or its child summaries) or "
            "one entry, one page (at most 8,000 UTF-16 units) at a time; the reply ends with the "
            "exact call for the next page, with the digest of the whole text.",
            CtxExpandInput,
            _expand,
            effects=(Effect("read"),),
            surfaces=_SURFACES,
            inline_cap=LARGE_CAP,
        ),
    ]
