"""The budget of a session's next request, measured where possible (TOK-2..4, LIM-7).

Reads only small columns (token counts through the covering index) and the request log.
"""

from __future__ import annotations

from typing import Any

from ..errors import BudgetError
from ..ledger import EntryHead, LedgerBackend, RequestRecord, Scope
from ..tokens import Anchor, AnchorKey, Budget, Usage, estimate_input, resolve_window
from ._view import View
from .limit import EngineConfig, assemble

_FIXED_ROLES = frozenset({"system", "developer"})


def budget_report(
    led: LedgerBackend, scope: Scope, *, model: str | None, window: int | None
) -> dict[str, Any]:
    """Budget of the request that would follow the session's last entry.

    Only small columns are read (token counts from the covering index) plus the request log.
    """
    heads: list[EntryHead] = led.heads(scope)
    requests: list[RequestRecord] = led.requests(scope)
    info = led.session(scope)
    meta = info.meta if info else {}
    last_req = requests[-1] if requests else None
    chosen = model or (last_req.model if last_req else None) or meta.get("model")
    res = resolve_window(chosen, override=window)
    system = sum(h.tokens for h in heads if h.role in _FIXED_ROLES)
    history = sum(h.tokens for h in heads if h.role not in _FIXED_ROLES)
    tools = int(meta.get("tools_tokens", 0))
    budget = Budget.for_window(
        res.window, system_tokens=system, tools_tokens=tools, max_output=res.max_output
    )
    estimated_total = budget.fixed + history
    anchor = None
    delta = estimated_total
    if last_req is not None and last_req.entry_id is not None:
        usage = Usage(
            last_req.new_input,
            last_req.cache_read,
            last_req.cache_write,
            last_req.output,
            last_req.reasoning,
        )
        measured = usage.input_total
        anchor_seq = next((h.seq for h in heads if h.id == last_req.entry_id), None)
        if measured is not None and anchor_seq is not None:
            anchor = Anchor(
                measured_input=measured,
                last_seq=anchor_seq,
                model=last_req.model or "",
                effort=None,
                catalog_digest="",
                config_digest="",
                checkpoint_id=None,
            )
            delta = sum(h.tokens for h in heads if h.seq >= anchor_seq)
    key = AnchorKey(
        model=chosen or "", effort=None, catalog_digest="", config_digest="", checkpoint_id=None
    )
    est = estimate_input(anchor, current=key, delta_tokens=delta, estimated_total=estimated_total)
    return {
        "engine": _engine_preview(led, scope, budget),
        "session": scope.session,
        "model": chosen,
        "window": res.window,
        "window_source": res.source,
        "counter": led.counter.name,
        "system": system,
        "tools": tools,
        "history": history,
        "output_reserve": budget.output_reserve,
        "margin": budget.margin,
        "input_estimated": estimated_total,
        "input": est.tokens,
        "measured": est.measured,
        "basis": est.basis,
        "utilization": est.tokens / res.window if res.window else 0.0,
        "threshold": budget.threshold_tokens,
        "over_threshold": est.tokens >= budget.threshold_tokens,
        "entries": len(heads),
    }


def _engine_preview(led: LedgerBackend, scope: Scope, budget: Budget) -> dict[str, Any]:
    """What the engine would do for the next request: its stage, its actions, what it sends."""
    try:
        a = assemble(View.from_ledger(led, scope), budget, EngineConfig(counter=led.counter))
    except BudgetError as exc:
        return {"error": exc.code, "message": str(exc)}
    kinds: dict[str, int] = {}
    for action in a.actions:
        kinds[type(action).__name__] = kinds.get(type(action).__name__, 0) + 1
    return {
        "stage": a.breakdown.get("stage"),
        "actions": kinds,
        "input": budget.fixed + a.history_tokens,
        "checkpoint_proposed": a.checkpoint_to_store is not None,
    }
