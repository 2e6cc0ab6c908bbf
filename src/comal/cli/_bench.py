"""``comal bench``: numbers printed for people, never asserted by tests."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..bench import run_context_bench, run_ledger_bench
from ..tokens import EstimatingCounter, TokenCounter, default_counter
from ._common import JsonOpt, emit_json, err, out

app = typer.Typer(help="Benchmarks (numbers to read, not tests).", no_args_is_help=True)


@app.command("ledger")
def ledger_bench(
    entries: Annotated[
        int, typer.Option(help="Entries in the benchmark session.", min=100)
    ] = 100_000,
    window: Annotated[int, typer.Option(help="Tokens of tail to read.", min=1000)] = 128_000,
    reads: Annotated[int, typer.Option(help="Tail reads to time.", min=10)] = 200,
    counter: Annotated[
        str, typer.Option(help="estimate (fast fallback) or tiktoken (exact, slower appends)")
    ] = "estimate",
    as_json: JsonOpt = False,
) -> None:
    """Appends/s (one transaction per step; NORMAL and FULL sync), batched import rows/s, and
    p50/p99 to read the tail that fills a window.

    Example: comal bench ledger --entries 100000 --window 128000
    """
    chosen: TokenCounter = EstimatingCounter() if counter == "estimate" else default_counter()
    with err.status("benchmarking") as status:
        result = run_ledger_bench(
            entries=entries,
            window_tokens=window,
            reads=reads,
            counter=chosen,
            progress=lambda msg: status.update(msg),
        )
    if as_json:
        emit_json(result.as_dict())
        return
    table = Table(
        "measure", "value", title=f"ledger: {result.entries:,} entries, {result.steps:,} steps"
    )
    table.add_row("counter", result.counter)
    table.add_row(
        "appends, 1 tx/step, synchronous=NORMAL",
        f"{result.append_steps_per_s:,.0f} steps/s ({result.append_entries_per_s:,.0f} entries/s)",
    )
    table.add_row(
        "appends, 1 tx/step, synchronous=FULL", f"{result.append_full_steps_per_s:,.0f} steps/s"
    )
    table.add_row("batched import", f"{result.batched_rows_per_s:,.0f} rows/s")
    table.add_row(
        "batched import, storage only (no counting)",
        f"{result.batched_rows_per_s_storage_only:,.0f} rows/s",
    )
    table.add_row("tail read", f"{result.tail_entries} entries, {result.tail_tokens:,} tokens")
    table.add_row(
        "tail read p50 / p99", f"{result.tail_p50_ms:.2f} ms / {result.tail_p99_ms:.2f} ms"
    )
    table.add_row("token counting", f"{result.counting_mb_per_s:.1f} MB/s")
    out.print(table)


@app.command("context")
def context_bench(
    entries: Annotated[
        str, typer.Option(help="Session sizes to compare, comma-separated.")
    ] = "2000,20000",
    window: Annotated[int, typer.Option(help="Window to assemble.", min=1000)] = 128_000,
    turns: Annotated[int, typer.Option(help="Turns to time per size.", min=10)] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Per-turn time to read the view from the ledger and assemble a window, on sessions grown
    with the engine running (so they carry the checkpoints an agent would have).

    Example: comal bench context --entries 2000,20000 --window 128000
    """
    results = []
    for size in (int(s) for s in entries.split(",")):
        with err.status(f"context bench, {size:,} entries") as status:
            results.append(
                run_context_bench(
                    entries=size,
                    window=window,
                    measure=turns,
                    progress=lambda msg: status.update(msg),
                )
            )
    if as_json:
        emit_json([r.as_dict() for r in results])
        return
    table = Table(
        "entries", "tokens", "checkpoints", "p50 ms", "p99 ms", "last ms", "view p50",
        "assemble p50", "input", title=f"assembling a {window:,}-token window per turn",
    )  # fmt: skip
    for r in results:
        table.add_row(
            f"{r.entries:,}", f"{r.session_tokens:,}", str(r.checkpoints), f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}", f"{r.last_ms:.2f}", f"{r.view_p50_ms:.2f}",
            f"{r.assemble_p50_ms:.2f}", f"{r.input_tokens_last:,}",
        )  # fmt: skip
    out.print(table)
