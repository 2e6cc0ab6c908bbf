"""``comal context``: the budget of a session's next request, as the agent would send it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    pass
from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, err, ledger, out

app = typer.Typer()


@app.command()
def context(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    model: Annotated[str | None, typer.Option(help="Model to budget for (provider:model).")] = None,
    context_window: Annotated[
        int | None,
        typer.Option(help="Cap the window (combined with the model's by minimum).", min=1),
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="Context engine (default: the configuration's).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the budget of the session's next request as the agent would send it (= /context):
    its system prompt, tool schemas, the history the engine assembles, output reserve, margin
    and utilization, measured (from recorded usage) or estimated (~); with the dag engine,
    its summaries by depth, coverage, pending jobs, summarizer spend and breaker.

    Example: comal context 3f2a --model anthropic:claude-sonnet-4-5 --context-window 64000
    """
    from ..agent import Flags, Runtime, raise_for, render_report

    with coded_errors(as_json), ledger() as led:
        flags = Flags(model=model, context_window=context_window, engine=engine)
        runtime = Runtime.open(led, flags, resume=session, need_model=False)
        with runtime.closing():  # it may have started the configured MCP servers
            outcome = runtime.control("context", {}, surface="cli")
        raise_for(outcome)
        report = outcome.receipt.observations["report"]
    if as_json:
        emit_json(report)
        return
    table = Table("", "tokens", title=f"context of {report['session']}")
    for label, value in render_report(report):
        if label != "note":
            table.add_row(label, escape(safe(value)))
    table.caption = f"counter: {report['counter']}; model: {report['model'] or 'unknown'}"
    out.print(table)
    if report.get("window_note"):
        err.print(escape(safe(str(report["window_note"]))))
    if "dag" in report:
        _dag_table(report["dag"])  # the full DAG state, beyond the summary rows above


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
