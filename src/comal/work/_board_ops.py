"""``BoardAdd``, ``BoardUpdate`` and ``BoardList``: the board through the one registry (BRD-1).

The changes a call makes travel in its receipt (:mod:`._board`); its result ends with the whole
board. Marking an item ``done`` that has a check runs the check at once: a ``Bash`` call the
house judges under the session's policy for the same actor (it is the model's command, so it
gets no more than the model's own calls would), receipted in its own right; only when it passes
does the item become ``verified``. Files named as evidence are kept: each is read from the
workspace and stored whole as an output record (``EvidenceRead(record=…)`` pages it), its sha256
on the board (BRD-3).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..ledger import Scope
from ..messages import ToolCall, sha256_hex
from ..ops import (
    OUTPUT_KIND,
    Actor,
    CallContext,
    Effect,
    HouseFactory,
    Operation,
    OpsError,
    ToolOutput,
)
from ._board import BoardItem, board_of, fold
from ._errors import BoardItemUnknown, BoardOrderError

__all__ = ["board_operations", "check_item"]

Text = Annotated[str, Field(min_length=1, max_length=2_000)]
Command = Annotated[str, Field(min_length=1, max_length=2_000)]
Evidence = Annotated[str, Field(min_length=1, max_length=500)]
_KEEP_BYTES = 256 * 1024
_TAIL = 1_000


class BoardAddInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: Text = Field(description="The criterion, small enough to verify on its own.")
    check: Command | None = Field(
        None, description="A shell command that passes (exit 0) when the criterion holds."
    )
    depends_on: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=list, max_length=20, description="Items that must be done first."
    )
    evidence: list[Evidence] = Field(
        default_factory=list,
        max_length=20,
        description="Workspace files (kept as evidence) or short notes it rests on.",
    )


class BoardUpdateInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    item: int = Field(ge=1, description="The item's number (#n on the board).")
    status: Literal["pending", "in_progress", "done"] | None = Field(
        None,
        description="New status. 'verified' is not yours to set: the house sets it when the "
        "item's check passes, which marking it done runs.",
    )
    text: Text | None = None
    check: Command | None = None
    evidence: list[Evidence] = Field(
        default_factory=list, max_length=20, description="More files or notes, added."
    )


class BoardListInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _kept(raw: str, ctx: CallContext) -> dict[str, Any]:
    """``raw`` as evidence: a workspace file stored whole (or its digest, when too large or not
    text), else a note."""
    ws = ctx.workspace
    if ws is None:
        return {"note": raw}
    try:
        rel = ws.locate(raw)
        data = ws.read_bytes(rel)
    except OpsError:
        return {"note": raw}
    if data is None:
        return {"note": raw}
    digest = sha256_hex(data)
    kept: dict[str, Any] = {"path": rel, "sha256": digest, "size": len(data), "record": None}
    try:
        content = data.decode("utf-8") if len(data) <= _KEEP_BYTES else None
    except UnicodeDecodeError:
        content = None
    if content is not None:
        body = {
            "v": 1,
            "call_id": ctx.call_id,
            "operation": ctx.operation,
            "content": content,
            "sha256": sha256_hex(content),
            "size": len(data),
            "size_utf16": len(content.encode("utf-16-le", "surrogatepass")) // 2,
            "chars": len(content),
            "artifact": rel,
        }
        kept["record"] = ctx.ledger.add_record(ctx.scope, "event", OUTPUT_KIND, body).id
    return kept


def check_item(
    factory: HouseFactory, scope: Scope, actor: Actor, item: BoardItem, origin: str
) -> dict[str, Any]:
    """Run ``item``'s check as a Bash call the house judges for ``actor`` under the session's
    policy; the ``checked`` change its receipt supports."""
    assert item.check is not None
    house = factory.house(scope)
    call_id = f"check-{origin}-{item.id}-{uuid.uuid4().hex[:8]}"
    call = ToolCall(call_id, "Bash", json.dumps({"command": item.check}))
    outcome = house.run(call, actor, surface="model")
    receipt = house.record(outcome, append_result=False)
    return {
        "v": 1,
        "op": "checked",
        "item": item.id,
        "passed": receipt.status == "ok",
        "receipt": receipt.record_id,
        "status": receipt.status,
        "command": item.check,
        "tail": outcome.result.text[-_TAIL:],
    }


def _result(ctx: CallContext, said: str, changes: list[dict[str, Any]]) -> ToolOutput:
    board = fold(((0, c) for c in changes), board_of(ctx.ledger, ctx.scope))
    failed = [c for c in changes if c.get("op") == "checked" and not c.get("passed")]
    text = f"{said}\n\n{board.render()}"
    return ToolOutput(text, is_error=False, observations={"board": changes, "failed": len(failed)})


def _add(args: BoardAddInput, ctx: CallContext) -> ToolOutput:
    board = board_of(ctx.ledger, ctx.scope)
    unknown = [d for d in args.depends_on if board.get(d) is None]
    if unknown:
        raise BoardItemUnknown(
            f"the board has no item {', '.join(f'#{d}' for d in unknown)} to depend on; "
            "BoardList shows the items"
        )
    number = len(board.items) + 1
    change = {
        "v": 1,
        "op": "add",
        "item": number,
        "text": args.text,
        "check": args.check,
        "depends_on": sorted(set(args.depends_on)),
        "evidence": [_kept(e, ctx) for e in args.evidence],
    }
    return _result(ctx, f"added #{number}", [change])


def _update(args: BoardUpdateInput, ctx: CallContext) -> ToolOutput:
    board = board_of(ctx.ledger, ctx.scope)
    item = board.get(args.item)
    if item is None:
        raise BoardItemUnknown(
            f"the board has no item #{args.item} (it has {len(board.items)}); BoardList shows them"
        )
    if args.status == "done":
        waiting = [d for d in item.depends_on if not _closed(board.get(d))]
        if waiting:
            raise BoardOrderError(
                f"#{item.id} depends on {', '.join(f'#{d}' for d in waiting)}, not done yet; "
                "finish those first"
            )
    change: dict[str, Any] = {"v": 1, "op": "update", "item": item.id}
    if args.text is not None:
        change["text"] = args.text
    if args.check is not None:
        change["check"] = args.check
    status = args.status
    if status is None and item.status == "verified" and ("text" in change or "check" in change):
        # A changed criterion or check is no longer the one that passed.
        status = "done"
    if status is not None:
        change["status"] = status
    if args.evidence:
        change["evidence"] = [_kept(e, ctx) for e in args.evidence]
    changes = [change]
    updated = fold([(0, change)], board).get(item.id)
    assert updated is not None
    said = f"updated #{item.id}"
    if updated.status == "done" and updated.check is not None and ctx.factory is not None:
        checked = check_item(ctx.factory, ctx.scope, ctx.actor, updated, ctx.call_id)
        changes.append(checked)
        said += ": its check " + ("passed, so it is verified" if checked["passed"] else "failed")
    return _result(ctx, said, changes)


def _closed(item: BoardItem | None) -> bool:
    return item is not None and item.closed


def _list(args: BoardListInput, ctx: CallContext) -> ToolOutput:
    board = board_of(ctx.ledger, ctx.scope)
    return ToolOutput(board.render(), observations={"items": len(board.items)})


def board_operations() -> list[Operation]:
    # The board lives in the ledger's receipts: nothing in the workspace or the world changes
    # (a check is its own Bash call, judged on its own), so the policy sees reads.
    reads = (Effect("read"),)
    return [
        Operation(
            "BoardAdd",
            "Add a criterion to the task's board: small, checkable, with an optional shell "
            "check, the items it depends on, and the files or notes it rests on.",
            BoardAddInput,
            _add,
            effects=reads,
        ),
        Operation(
            "BoardUpdate",
            "Change a board item: its status (pending, in_progress, done), text, check or "
            "evidence. Marking it done runs its check; the house marks it verified only when "
            "the check passes.",
            BoardUpdateInput,
            _update,
            effects=reads,
        ),
        Operation(
            "BoardList",
            "Show the task's board: every item, its status, check and evidence.",
            BoardListInput,
            _list,
            effects=(Effect("none"),),
        ),
    ]
