"""``comal context``: the budget of a session's next request, measured where possible."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from ..ledger import EntryHead, RequestRecord, Scope, SQLiteLedger
from ..tokens import Anchor, AnchorKey, Budget, Usage, estimate_input, resolve_window
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

app = typer.Typer()

_FIXED_ROLES = {"system", "developer"}


def budget_report(
    led: SQLiteLedger, scope: Scope, *, model: str | None, window: int | None
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


@app.command()
def context(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    model: Annotated[str | None, typer.Option(help="Model to budget for (provider:model).")] = None,
    context_window: Annotated[
        int | None,
        typer.Option(help="Cap the window (combined with the model's by minimum).", min=1),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the budget of the session's next request: window, system, tools, history, output
    reserve, margin and utilization, measured (from recorded usage) or estimated (~).

    Example: comal context 3f2a --model anthropic:claude-sonnet-4-5 --context-window 64000
    """
    with coded_errors(as_json), ledger() as led:
        report = budget_report(led, led.resolve(session), model=model, window=context_window)
    if as_json:
        emit_json(report)
        return
    mark = "" if report["measured"] else " ~"
    table = Table("", "tokens", title=f"context of {report['session']}")
    table.add_row("window", f"{report['window']:,} ({report['window_source']})")
    table.add_row("system", f"{report['system']:,}")
    table.add_row("tools", f"{report['tools']:,}")
    table.add_row("history", f"{report['history']:,} in {report['entries']:,} entries")
    table.add_row("output reserve", f"{report['output_reserve']:,}")
    table.add_row("margin", f"{report['margin']:,}")
    table.add_row("input (estimated)", f"{report['input_estimated']:,}")
    table.add_row(f"input{mark}", f"{report['input']:,} — {report['basis']}")
    table.add_row("threshold (90%)", f"{report['threshold']:,}")
    table.add_row(
        "utilization",
        f"{report['utilization']:.0%}{mark}"
        + ("  [red]over threshold[/]" if report["over_threshold"] else ""),
    )
    table.caption = f"counter: {report['counter']}; model: {report['model'] or 'unknown'}"
    out.print(table)
