"""``comal context``: the budget of a session's next request, measured where possible."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from ..compaction import dag_report
from ..context import budget_report
from ..tokens import Budget
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

app = typer.Typer()


@app.command()
def context(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    model: Annotated[str | None, typer.Option(help="Model to budget for (provider:model).")] = None,
    context_window: Annotated[
        int | None,
        typer.Option(help="Cap the window (combined with the model's by minimum).", min=1),
    ] = None,
    engine_name: Annotated[
        str | None,
        typer.Option(
            "--engine", help="Show this engine's state too (dag: shown whenever it has summaries)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the budget of the session's next request: window, system, tools, history, output
    reserve, margin and utilization, measured (from recorded usage) or estimated (~); with the
    dag engine, its summaries by depth, coverage, pending jobs, summarizer spend and breaker.

    Example: comal context 3f2a --model anthropic:claude-sonnet-4-5 --context-window 64000
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        report = budget_report(led, scope, model=model, window=context_window)
        if engine_name == "dag" or (engine_name is None and led.summary_frontier(scope)):
            budget = Budget.for_window(report["window"], system_tokens=0, tools_tokens=0)
            report["dag"] = dag_report(led, scope, budget)
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
    engine = report["engine"]
    if "error" in engine:
        table.add_row("engine (limit)", f"[red]{engine['error']}[/]: {engine['message']}")
    else:
        acts = ", ".join(f"{k}×{n}" for k, n in engine["actions"].items()) or "nothing to do"
        table.add_row(
            "engine (limit) would send",
            f"{engine['input']:,} — stage {engine['stage']}: {acts}"
            + (" (derives a checkpoint)" if engine["checkpoint_proposed"] else ""),
        )
    table.caption = f"counter: {report['counter']}; model: {report['model'] or 'unknown'}"
    out.print(table)
    if "dag" in report:
        _dag_table(report["dag"])


def _dag_table(dag: dict[str, Any]) -> None:
    table = Table("dag", "", title="dag engine")
    depths = ", ".join(f"depth {d}: {n}" for d, n in dag["by_depth"].items()) or "none"
    table.add_row("summaries", f"{dag['summaries']} ({depths}); frontier {len(dag['frontier'])}")
    table.add_row(
        "coverage",
        f"{dag['covered_entries']:,} of {dag['session_entries']:,} entries "
        f"(through seq {dag['covered_through_seq']})",
    )
    pending = ", ".join(
        f"{p['kind']} {p.get('first_seq', '')}..{p.get('last_seq', '')}"
        if p["kind"] == "leaf"
        else f"{p['kind']} {p.get('children', p.get('code', ''))}"
        for p in dag["pending"]
    )
    table.add_row("pending jobs", pending or "none")
    spend = dag["spend"]
    caps = f"{spend['spent_hour']:,}/{spend['cap_hour']:,} this hour, "
    caps += f"{spend['spent_day']:,}/{spend['cap_day']:,} today"
    table.add_row("summarizer", f"{dag['summarizer']}; spend {caps}")
    table.add_row("breaker", f"{spend['breaker']} ({spend['failures']} consecutive failures)")
    if dag["degraded"]:
        table.add_row("degraded", f"[red]{dag['degraded']}[/]")
    if dag["lease"]:
        table.add_row("compacting now", f"lease held by {dag['lease']['owner']}")
    out.print(table)
