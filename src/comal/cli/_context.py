"""``comal context``: the budget of a session's next request, measured where possible."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..context import budget_report
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
