"""What the HTTP API and the dashboard read: JSON views of one tenant's ledger.

Every function takes the tenant and only ever reads that tenant's sessions (LED-2): a session
id of another tenant reads as not found. The functions are the same reads the CLI makes
(sessions, entries, requests, receipts, checkpoints, records), shaped for JSON.
"""

from __future__ import annotations

from typing import Any

from ..agent._liveness import liveness
from ..ledger import Entry, LedgerBackend, Scope, SessionInfo
from ..messages import message_to_dict
from ..ops import receipts
from ..tokens import session_cost
from ..work import work_view
from ._approvals import pending
from ._record import INSTRUCTIONS_EVENT

__all__ = [
    "entries_view",
    "find_session",
    "pending_approvals",
    "records_view",
    "session_view",
    "sessions_view",
    "snapshot",
    "turns_view",
]

_Usage = list[tuple[str | None, str | None, dict[str, Any]]]
_FIELDS = ("new_input", "cache_read", "cache_write", "output", "reasoning")


def _usage(groups: _Usage) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in _FIELDS:
        values = [u[name] for _, _, u in groups if u[name] is not None]
        out[name] = sum(values) if values else None
    return out


def _last_model(groups: _Usage) -> str | None:
    models = [model for model, _, _ in groups if model]
    return models[-1] if models else None


def find_session(led: LedgerBackend, tenant: str, session_id: str) -> SessionInfo | None:
    for info in led.sessions(tenant=tenant):
        if info.id == session_id:
            return info
    return None


def _summary(led: LedgerBackend, info: SessionInfo) -> dict[str, Any]:
    groups = led.usage_by_model(info.scope)
    # Priced as every surface prices it: a model without a list price makes the cost unknown.
    cost = session_cost(groups)
    return {
        "id": info.id,
        "tenant": info.tenant,
        "agent": info.agent,
        "parent": info.parent,
        "status": liveness(led, info),
        "title": info.title,
        "source": info.source,
        "created_at": info.created_at,
        "entries": info.entries,
        "tokens": info.tokens,
        "engine": info.meta.get("engine", "limit"),
        "model": info.meta.get("model") or _last_model(groups),
        "requests": info.requests,
        "usage": _usage(groups),
        "cost_usd": cost.usd,
        "cost_unknown": list(cost.unknown),
        "checkpoints": len(led.checkpoints(info.scope)),
        "pending_approvals": len(pending(led, info.scope)) if info.status == "active" else 0,
    }


def sessions_view(
    led: LedgerBackend,
    tenant: str,
    *,
    status: str | None = None,
    agent: str | None = None,
    q: str | None = None,
    limit: int = 200,
) -> list[dict[str, Any]]:
    found = []
    for info in reversed(led.sessions(tenant=tenant)):
        if status and status not in (info.status, liveness(led, info)):
            continue
        if agent and info.agent != agent:
            continue
        if q and q.lower() not in f"{info.id} {info.title or ''} {info.meta.get('model', '')}":
            continue
        found.append(_summary(led, info))
        if len(found) >= limit:
            break
    return found


def session_view(led: LedgerBackend, info: SessionInfo) -> dict[str, Any]:
    out = _summary(led, info)
    out["meta"] = info.meta
    out["children"] = [c.id for c in led.children(info.scope)]
    # BRD-2, WRK-1: the board, the tree of work steps (each with its child's own) and drafts.
    out["work"] = work_view(led, info.scope)
    return out


def _entry(e: Entry) -> dict[str, Any]:
    m = e.message
    return {
        "id": e.id,
        "seq": e.seq,
        "step": e.step,
        "role": e.role,
        "tokens": e.tokens,
        "size": e.size,
        "created_at": e.created_at,
        "digest": e.digest,
        "output_digest": e.output_digest,
        "calls": [{"id": c.id, "name": c.name} for c in m.tool_calls],
        "result_of": m.tool_result.call_id if m.tool_result is not None else None,
        "is_error": bool(m.tool_result and m.tool_result.is_error),
        "preview": m.text[:300],
        "message": message_to_dict(m),
    }


def entries_view(
    led: LedgerBackend, scope: Scope, *, start: int = 0, end: int | None = None, limit: int = 500
) -> list[dict[str, Any]]:
    last = start + limit - 1 if end is None else min(end, start + limit - 1)
    return [_entry(e) for e in led.entries(scope, start_seq=start, end_seq=last)]


def turns_view(led: LedgerBackend, scope: Scope) -> list[dict[str, Any]]:
    """Per request: what the model saw against the whole history, and what the engine did."""
    out = []
    for n, r in enumerate(led.requests(scope)):
        meta = r.meta
        out.append(
            {
                "turn": n,
                "request": r.id,
                "entry_id": r.entry_id,
                "model": r.model,
                "protocol": r.protocol,
                "usage": {
                    "new_input": r.new_input,
                    "cache_read": r.cache_read,
                    "cache_write": r.cache_write,
                    "output": r.output,
                    "reasoning": r.reasoning,
                },
                "stage": meta.get("stage"),
                "input_tokens": meta.get("input_tokens"),
                "session_tokens": meta.get("session_tokens"),
                "history_tokens": meta.get("history_tokens"),
                "fixed_tokens": meta.get("fixed_tokens"),
                "window": meta.get("window"),
                "referenced": meta.get("referenced", []),
                "bounded": meta.get("bounded", []),
                "checkpoint": meta.get("checkpoint"),
                "checkpoint_new": meta.get("checkpoint_new", False),
                "sent_seqs": meta.get("sent_seqs"),
                "recall": bool(meta.get("recall")),
                "max_tokens": meta.get("max_tokens"),
                "latency_ms": meta.get("latency_ms"),
                "error": meta.get("error") or meta.get("interrupted"),
                "metrics": meta.get("metrics"),
            }
        )
    return out


def records_view(
    led: LedgerBackend, scope: Scope, table: str, kinds: list[str] | None = None
) -> list[dict[str, Any]]:
    if table == "receipt":
        return [r.as_dict() for r in receipts(led, scope)]
    if table == "checkpoint":
        return [
            {
                "id": c.id,
                "first_seq": c.first_seq,
                "last_seq": c.last_seq,
                "tokens": c.tokens,
                "digest": c.digest,
                "created_at": c.created_at,
                "text": c.message.text,
                "meta": c.meta,
            }
            for c in led.checkpoints(scope)
        ]
    rows = led.records(scope, "summary" if table == "summary" else "event", kinds=kinds)
    out = []
    for r in rows:
        body = r.body
        if r.kind == INSTRUCTIONS_EVENT:  # tool schemas run to tens of kilobytes
            body = {"digest": body.get("digest"), "tools": len(body.get("tools") or [])}
        out.append({"id": r.id, "kind": r.kind, "created_at": r.created_at, "body": body})
    return out


def pending_approvals(led: LedgerBackend, tenant: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for info in led.sessions(tenant=tenant):
        if info.status == "active":
            found += pending(led, info.scope)
    return sorted(found, key=lambda p: str(p["created_at"]))


def snapshot(led: LedgerBackend, tenant: str) -> dict[str, Any]:
    """A cheap fingerprint of the tenant's state, for the live event stream."""
    sessions = {s.id: [s.entries, s.tokens, s.status] for s in led.sessions(tenant=tenant)}
    approvals = [p["id"] for p in pending_approvals(led, tenant)]
    return {"sessions": sessions, "approvals": approvals}
