"""After a crash (RES-3, RES-4): turn preparations without receipts into honest receipts.

For a native write, a fresh read of the file decides: if it now hashes to the intended digest the
receipt says ``postcondition_observed``; it does not claim the handler returned, nor who wrote the
bytes, and nothing is written again. If it still hashes to the digest recorded *before* the write
(or is still absent when the write was to create it), the write provably did not land: native
writes replace the file by an atomic rename, so a crash leaves the old bytes or the new ones,
never a mix. That call is receipted ``not_applied``, gets no result, and is reported as pending:
it is judged afresh and may run again — the only state from which a call is re-executed on its
own. A different content, a read that is denied (outside the workspace) or fails, or a
preparation without a write adapter (shell, MCP: kind ``start``) stays ``uncertain``, which
blocks automatic insistence (:func:`~comal.ops.may_retry` says no, with the reason).

A started call whose operation declares a recovery adapter (PLG-2: a plugin's publish, say) and
recorded its intent in the preparation is decided the same way by that adapter's fresh
observation (:mod:`._recovery`): the same three statuses, with the adapter's reason and, when
it gives one, the text the model reads. An adapter that fails leaves the call ``uncertain``.

Calls still open in the ledger get a result telling the model the same thing, appended to their
step when it is the session's latest. In a session imported from another harness (its
``source`` is set), an open call to an operation with effects has no preparation at all: it may
have started elsewhere, so it is receipted ``uncertain`` too. In a native session an open call
without a preparation never started here (the house prepares before every effect) and is
reported as pending, to be judged afresh.

Reconciling twice writes nothing the second time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ledger import LedgerBackend, Record, Scope
from ..messages import Message, Role, ToolCall, ToolResult, sha256_hex
from ._errors import OpsError, WorkspaceEscape
from ._model import Actor, Effect, Status, now
from ._operation import Operation, Registry
from ._receipt import Receipt, disposition_for, receipts
from ._recovery import RecoveryContext
from ._workspace import Workspace

__all__ = ["ReconcileReport", "Reconciled", "reconcile"]

_NOT_CLAIMED = (
    "This observation does not say the original handler returned, nor who wrote these bytes."
)


@dataclass(frozen=True, slots=True)
class Reconciled:
    call_id: str
    operation: str
    status: Status
    reason: str
    receipt: int
    preparation: int | None


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    items: tuple[Reconciled, ...]
    # Open calls never started by this house, or proven not_applied: judge them afresh.
    pending: tuple[str, ...]

    def status_of(self, call_id: str) -> Status | None:
        return next((i.status for i in self.items if i.call_id == call_id), None)


def _observe_write(
    body: dict[str, Any], workspace: Workspace | None
) -> tuple[Status, dict[str, Any]]:
    path = str(body["path"])
    seen: dict[str, Any] = {
        "path": path,
        "digest_before": body.get("digest_before"),
        "intended_digest": body["intended_digest"],
    }
    if workspace is None:
        return "uncertain", seen | {"reason": "no workspace to read the file from"}
    try:
        found = workspace.read_bytes(workspace.locate(path))
    except WorkspaceEscape as exc:
        return "uncertain", seen | {"reason": f"the read was denied: {exc}"}
    except OpsError as exc:
        return "uncertain", seen | {"reason": f"the file could not be read: {exc}"}
    if found is None:
        seen["digest_now"] = None
        if body.get("digest_before") is None:
            why = "the file the write was to create does not exist: the write did not land"
            return "not_applied", seen | {"postcondition": False, "reason": why}
        return "uncertain", seen | {"reason": "the file does not exist"}
    digest = sha256_hex(found)
    seen["digest_now"] = digest
    if digest == body["intended_digest"]:
        return "postcondition_observed", seen | {"postcondition": True, "note": _NOT_CLAIMED}
    if digest == body.get("digest_before"):
        why = "the file still has its content from before the write: the write did not land"
        return "not_applied", seen | {"postcondition": False, "reason": why}
    why = "the file differs from both the intended content and the content before"
    return "uncertain", seen | {"postcondition": False, "reason": why}


def _observe_intent(
    ledger: LedgerBackend,
    scope: Scope,
    workspace: Workspace | None,
    op: Operation | None,
    prep: Record,
) -> tuple[Status, dict[str, Any]]:
    """A started call: its operation's recovery adapter observes what its recorded intent
    meant (PLG-2); without an adapter, or an intent, its effects stay unknown."""
    body = prep.body
    intent = body.get("intent")
    if op is None or op.recover is None or not isinstance(intent, dict):
        why = (
            "has no postcondition adapter"
            if op is None or op.recover is None
            else ("started without a recorded intent")
        )
        return "uncertain", {"effects": "unknown", "reason": f"{body['operation']} {why}; its "
                             "effects are unknown"}  # fmt: skip
    ctx = RecoveryContext(ledger, scope, workspace, str(body["call_id"]), prep.id, body)
    try:
        seen = op.recover(intent, ctx)
    except Exception as exc:  # an observation that failed proves nothing, whatever it was
        why = f"the observation failed: {getattr(exc, 'code', type(exc).__name__)}: {exc}"
        return "uncertain", {"reason": why, "intent": intent}
    out = {"intent": intent, **dict(seen.observations)}
    if seen.text is not None:
        out["text"] = seen.text
    if seen.status != "postcondition_observed":
        out.setdefault("reason", "the observation does not match the intent")
    return seen.status, out


def _result_text(status: Status, operation: str, seen: dict[str, Any]) -> str:
    if isinstance(seen.get("text"), str):
        return str(seen["text"])
    if status == "postcondition_observed" and "path" not in seen:
        return (
            f"[postcondition_observed after an interruption: a fresh observation shows what "
            f"{operation} meant to do. It does not say the original handler returned.]"
        )
    if status == "postcondition_observed":
        return (
            f"[postcondition_observed after an interruption: {seen['path']} has the intended "
            f"sha256 {seen['intended_digest']}. {_NOT_CLAIMED}]"
        )
    return (
        f"[uncertain after an interruption: {operation} — {seen['reason']}. It will not be "
        "repeated automatically: inspect its effects and make a new proposal]"
    )


_Work = tuple[str, str, Status, dict[str, Any], Record | None, dict[str, Any]]
_UNJUDGED = {"decision": None, "rule": "unknown", "reason": "no judgment was recorded"}


def _work(
    ledger: LedgerBackend,
    scope: Scope,
    workspace: Workspace | None,
    registry: Registry | None,
    open_calls: dict[str, ToolCall],
) -> tuple[list[_Work], list[str]]:
    """(call, operation, status, observations, preparation, preparation body) to receipt, and
    the open calls that are merely pending."""
    done = receipts(ledger, scope)
    closed_preps = {r.preparation for r in done if r.preparation is not None}
    # A not_applied receipt closes its preparation but not its call: the call runs again.
    closed_calls = {r.call_id for r in done if r.status != "not_applied"}
    not_applied_preps = {r.preparation for r in done if r.status == "not_applied"}
    retried = {r.call_id for r in done if r.status == "not_applied"}
    all_preps = ledger.records(scope, "preparation")
    todo: list[_Work] = []
    for prep in all_preps:
        body = prep.body
        if prep.id in closed_preps or body.get("call_id") in closed_calls:
            continue
        if prep.kind == "write":
            status, seen = _observe_write(body, workspace)
        else:
            op = registry.get(body["operation"]) if registry is not None else None
            status, seen = _observe_intent(ledger, scope, workspace, op, prep)
        todo.append((body["call_id"], body["operation"], status, seen, prep, body))
    prepared_calls = {p.body.get("call_id") for p in all_preps if p.id not in not_applied_preps}
    info = ledger.session(scope)
    source = info.source if info is not None else None
    pending: list[str] = []
    for call in open_calls.values():
        if call.id in prepared_calls or call.id in closed_calls:
            continue
        op = registry.get(call.name) if registry is not None else None
        if (op is not None and op.read_only) or source is None or call.id in retried:
            pending.append(call.id)
            continue
        # Proposed in another harness: whether it ran is unknown, and nobody here judged it.
        effects = op.effects if op is not None else (Effect("unknown"),)
        body = {
            "actor": {"kind": "user", "id": f"imported:{source}"},
            "effects": [e.as_dict() for e in effects],
            "judgment": {
                "decision": None,
                "rule": "reconcile:imported",
                "reason": f"proposed in {source}; never judged by this house",
            },
        }
        seen = {"reason": "it was proposed outside this house without a durable preparation"}
        todo.append((call.id, call.name, "uncertain", seen, None, body))
    return todo, pending


def reconcile(
    ledger: LedgerBackend,
    scope: Scope,
    *,
    workspace: Workspace | None = None,
    registry: Registry | None = None,
) -> ReconcileReport:
    """Receipt every unreceipted preparation of the session; see the module docstring."""
    step, open_calls = _open_calls(ledger, scope)
    todo, pending = _work(ledger, scope, workspace, registry, open_calls)
    items: list[Reconciled] = []
    with ledger.atomic():
        for call_id, operation, status, seen, prepared, body in todo:
            entry_id = None
            open_call = open_calls.get(call_id)
            if status == "not_applied":
                # No result: the call stays open, to be judged and run again by the caller.
                if open_call is not None:
                    pending.append(call_id)
            elif open_call is not None and step is not None:
                text = _result_text(status, operation, seen)
                failed = status != "postcondition_observed"
                result = ToolResult(call_id, text, is_error=failed, name=operation)
                entries = ledger.append(scope, [Message(Role.TOOL, (result,))], join_step=step)
                entry_id = entries[0].id
            effects = tuple(Effect.from_dict(e) for e in body.get("effects", ()))
            args_digest = body.get("arguments_digest") or (
                sha256_hex(open_call.arguments) if open_call is not None else ""
            )
            receipt = Receipt(
                operation=operation,
                call_id=call_id,
                actor=Actor.from_dict(body["actor"]),
                surface=body.get("surface", "model"),
                arguments_digest=args_digest,
                judgment=body.get("judgment", _UNJUDGED),
                status=status,
                disposition=disposition_for(status, effects),
                ended_at=now(),
                observations=seen,
                effects=effects,
                preparation=prepared.id if prepared is not None else None,
                result_entry=entry_id,
            )
            rec = ledger.add_record(scope, "receipt", operation, receipt.to_body())
            items.append(
                Reconciled(
                    call_id,
                    operation,
                    status,
                    str(seen.get("reason", "")),
                    rec.id,
                    receipt.preparation,
                )
            )
    return ReconcileReport(tuple(items), tuple(pending))


def _open_calls(ledger: LedgerBackend, scope: Scope) -> tuple[int | None, dict[str, ToolCall]]:
    """The session's latest step and its calls without results (only the latest step may be
    open in a whole ledger)."""
    heads = ledger.heads(scope)
    if not heads:
        return None, {}
    step = heads[-1].step
    entries = ledger.entries(scope, start_seq=step)
    answered = {e.message.tool_result.call_id for e in entries if e.message.tool_result}
    calls = [c for e in entries for c in e.message.tool_calls if c.id not in answered]
    return step, {c.id: c for c in calls}
