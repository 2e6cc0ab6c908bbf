"""One proxied turn: budget, assembly, and the upstream body built from it (no I/O but the
ledger reads and the checkpoint it stores).

The engine assembles the session's view under the upstream model's window (TOK-3: the model's
window and ``--context-window`` by minimum), with the input budgeted against the window minus
the output reserve. What it returns is mapped back onto the client's own items: an item whose
messages all go up unchanged is sent exactly as the client sent it (``cache_control``,
signatures and unknown keys included); only what the engine replaced (a checkpoint, a
reference, a bounded message) is rendered anew. A request whose every item goes up unchanged,
with nothing added and no limit lowered, is sent as the client's exact bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..context import Bounded, MediaReferenced, Referenced
from ..ledger import LedgerBackend, Scope
from ..messages import Message, canonical_json, message_to_json
from ..messages.wire import WireProtocol
from ..ops import Registry
from ..tokens import TokenCounter, count_messages, resolve_window
from ..turns import Turn as Prepared
from ._config import ServeConfig
from ._engine import EngineAdapter
from ._wire import ClientRequest, Item, Piece, upstream_body

__all__ = ["EVIDENCE_TOOL", "Turn", "build_turn", "recall_tools"]

EVIDENCE_TOOL = "EvidenceRead"
_REWRITES = (Referenced, Bounded, MediaReferenced)


def recall_tools(protocol: WireProtocol, registry: Registry) -> tuple[dict[str, Any], ...]:
    """The schemas of ``registry``'s model operations in the route's tool format (building a
    registry derives every operation's schema: callers keep the result)."""
    return tuple(protocol.tool(spec) for spec in registry.catalog("model").tools("anthropic"))


def _name(tool: dict[str, Any]) -> str:
    return str(tool.get("name") or (tool.get("function") or {}).get("name") or "")


@dataclass(frozen=True)
class Turn:
    """What goes upstream for one request, and what the request record keeps about it."""

    body: bytes
    verbatim: bool
    offered: frozenset[str]  # the recall tools added upstream (none: the client's request as is)
    max_tokens: int | None
    lowered_from: int | None
    stage: str
    prepared: Prepared  # the turn service's: its record's fields, the one recorder

    @property
    def meta(self) -> dict[str, Any]:
        return self.prepared.record_meta()

    @property
    def offered_recall(self) -> bool:
        return bool(self.offered)


# The tokens of what clients resend unchanged on every request (the tool list with the recall
# tools beside it; the instructions: Claude Code's run to thousands of tokens), by tenant,
# counter and exact JSON: counting is the turn's costliest step. Kept per tenant, as the item
# cache is: how fast a request is answered must not tell one tenant what another sent.
_COUNTED: dict[tuple[str, str, str, str], int] = {}
_COUNTED_MOST = 512


def _counted(
    tenant: str, counter: TokenCounter, kind: str, text: str, count: Callable[[], int]
) -> int:
    key = (tenant, counter.name, kind, text)
    found = _COUNTED.get(key)
    if found is None:
        found = count()
        if len(_COUNTED) >= _COUNTED_MOST:
            _COUNTED.clear()
        _COUNTED[key] = found
    return found


def _instruction_tokens(tenant: str, counter: TokenCounter, instructions: Sequence[Message]) -> int:
    if not instructions:
        return count_messages(counter, [])
    text = "\n".join(message_to_json(m) for m in instructions)
    return _counted(
        tenant, counter, "instructions", text, lambda: count_messages(counter, list(instructions))
    )


def _pieces(
    assembled: Sequence[tuple[Message, int | None]],
    items: Sequence[Item],
    item_entries: Sequence[Sequence[int]],
    rewritten: set[int],
) -> list[Piece]:
    # What is most often so: every request message goes up as it came, in order, nothing
    # added or replaced: each item whole, as the client sent it (what the walk below gives).
    if all(item_entries) and not rewritten:
        flat = [i for members in item_entries for i in members]
        if len(flat) == len(assembled) and all(
            a[1] == i for a, i in zip(assembled, flat, strict=True)
        ):
            return [("wire", item) for item in items]
    where: dict[int, int] = {}
    for index, members in enumerate(item_entries):
        for entry_id in members:
            where[entry_id] = index
    pieces: list[Piece] = []
    canonical: list[Message] = []

    def flush() -> None:
        if canonical:
            pieces.append(("canonical", tuple(canonical)))
            canonical.clear()

    def item_of(position: int) -> int | None:
        entry_id = assembled[position][1]
        return where.get(entry_id) if entry_id is not None else None

    k = 0
    while k < len(assembled):
        j = item_of(k)
        if j is None:
            canonical.append(assembled[k][0])
            k += 1
            continue
        run = [k]
        while k + len(run) < len(assembled) and item_of(k + len(run)) == j:
            run.append(k + len(run))
        ids = [assembled[i][1] for i in run]
        whole = ids == list(item_entries[j]) and not any(i in rewritten for i in ids if i)
        if whole:
            flush()
            pieces.append(("wire", items[j]))
        else:
            canonical.extend(assembled[i][0] for i in run)
        k += len(run)
    flush()
    return pieces


def build_turn(
    ledger: LedgerBackend,
    scope: Scope,
    request: ClientRequest,
    entry_ids: Sequence[int],
    config: ServeConfig,
    *,
    allow_recall: bool,
    recall: Sequence[dict[str, Any]],
    engine: EngineAdapter,
    stitched: frozenset[int] = frozenset(),
) -> Turn:
    """``recall``: the engine's recall tools in the route's format, offered upstream when the
    assembly stands in for part of the history and the client does not declare a tool of the
    same name. ``stitched``: entries the client holds in another shape than stored (a streamed
    reply continued after recall), never sent as the client's item."""
    counter = ledger.counter
    service = engine.session(ledger, scope)
    resolution = resolve_window(request.model, override=config.context_window)
    declared = {_name(t) for t in request.tools if isinstance(t, dict)}
    extra = [t for t in recall if _name(t) not in declared]
    # Budgeted with the recall tools whether or not they are sent: offering them must not push
    # an assembly that fit without them over the window.
    tools_json = canonical_json([*request.tools, *extra])
    budget = service.budget(
        resolution.window,
        system_tokens=_instruction_tokens(scope.tenant, counter, request.instructions),
        tools_tokens=_counted(
            scope.tenant, counter, "tools", tools_json, lambda: counter.count(tools_json)
        ),
        output_reserve=config.output_reserve,
        max_output=resolution.max_output,
        max_input=resolution.max_input,
    )
    # The turn service's one order (maintenance, view, assembly, commit, the record's fields);
    # maintenance inline: the proxy's reply waits on nothing else, and no thread outlives it.
    prepared = service.prepare(budget, defer=False)
    view, assembly = prepared.view, prepared.assembly
    rewritten = {a.entry_id for a in assembly.actions if isinstance(a, _REWRITES)}
    # Any engine may send a message other than the stored one under its entry id (the
    # pipeline's placeholders, the dag's bounds): those are rendered anew, never the client's.
    stored = {e.id: e.message for e in (*view.pinned, *view.head, *view.entries)}
    for message, entry_id in zip(assembly.messages, assembly.entry_ids, strict=True):
        if entry_id is not None:
            kept = stored.get(entry_id)
            if kept is not message and kept != message:
                rewritten.add(entry_id)
    rewritten |= stitched
    # Map each request message to its entry, item by item.
    item_entries: list[list[int]] = []
    cursor = 0
    for item in request.items:
        item_entries.append(list(entry_ids[cursor : cursor + len(item.messages)]))
        cursor += len(item.messages)
    assembled = list(zip(assembly.messages, assembly.entry_ids, strict=True))
    pieces = _pieces(assembled, request.items, item_entries, rewritten)
    has_checkpoint = view.checkpoint is not None or assembly.checkpoint_to_store is not None
    sent_ids = set(assembly.entry_ids)
    left_out = any(e.id not in sent_ids for e in view.entries)
    stands_in = bool(rewritten - stitched) or has_checkpoint or bool(view.summaries) or left_out
    offer = allow_recall and stands_in and bool(extra)
    input_tokens = budget.fixed + assembly.history_tokens
    room = budget.window - input_tokens - budget.margin
    if resolution.max_output is not None:
        room = min(room, resolution.max_output)
    upstream_max = request.max_tokens
    lowered: int | None = None
    if request.max_tokens is not None and request.max_tokens > room:
        upstream_max, lowered = max(room, 1), request.max_tokens
    all_wire = [p[1] for p in pieces if p[0] == "wire"]
    verbatim = (
        len(all_wire) == len(pieces) == len(request.items)
        and all(a is b for a, b in zip(all_wire, request.items, strict=False))
        and not offer
        and lowered is None
    )
    if verbatim:
        body = request.raw
    else:
        value = upstream_body(
            request,
            pieces,
            max_tokens=upstream_max,
            extra_tools=extra if offer else [],
        )
        try:
            body = orjson.dumps(value)
        except (orjson.JSONEncodeError, TypeError):  # a lone surrogate, an int over 64 bits
            body = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    # The request record: the fields every surface records (OBS-1), then the proxy's own.
    prepared.add(
        {
            "verbatim": verbatim,
            "window_source": resolution.source,
            "recall_offered": sorted(_name(t) for t in extra) if offer else [],
            "max_tokens": {"client": request.max_tokens, "upstream": upstream_max},
        }
    )
    stage = str(prepared.meta["stage"])
    offered = frozenset(_name(t) for t in extra) if offer else frozenset()
    return Turn(body, verbatim, offered, upstream_max, lowered, stage, prepared)
