"""``comal bench``: numbers printed for people, never asserted by tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from ..errors import UserError

if TYPE_CHECKING:
    from ..tokens import TokenCounter
from ._common import JsonOpt, Output, coded_errors, emit_json, err, out

app = typer.Typer(help="Benchmarks (numbers to read, not tests).", no_args_is_help=True)


def _b() -> Any:
    """comal.bench, imported when a benchmark runs (it pulls in the corpus tools, pricing
    tables and LangChain): the rest of the CLI starts without it."""
    from .. import bench

    return bench


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
    writers: Annotated[
        str | None,
        typer.Option(help="Concurrent writer processes to measure, comma-separated (1,8,32)."),
    ] = None,
    writer_steps: Annotated[
        int, typer.Option(help="Steps appended per --writers round, shared by its writers.", min=10)
    ] = 2000,
    transcripts: Annotated[
        list[Path] | None,
        typer.Option(help="Transcript files or folders: ledger bytes per MB, before/after."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Appends/s (one transaction per step; NORMAL and FULL sync), batched import rows/s, and
    p50/p99 to read the tail that fills a window, beside raw sqlite3 on the same steps; with
    --writers, steps/s and append latency of concurrent writers on SQLite and, when --ledger
    is a postgresql:// URL, on PostgreSQL beside it; with --transcripts, the ledger's bytes per
    MB of transcript. SQLite always runs on scratch files, PostgreSQL in a scratch schema that
    is dropped afterwards: a benchmark never writes into a ledger you keep.

    Example: comal bench ledger --entries 20000 --writers 1,8,32 --ledger postgresql://u@h/db
    """
    from ..ledger._target import parse_target
    from ..tokens import EstimatingCounter, default_counter
    from ._common import STATE

    counts = _numbers(writers, "--writers", least=1, most=256) if writers else []
    given = STATE.ledger_path
    ledger = [given] if given and parse_target(given).kind == "postgres" else []
    chosen: TokenCounter = EstimatingCounter() if counter == "estimate" else default_counter()
    with err.status("benchmarking") as status:
        result = _b().run_ledger_bench(
            entries=entries,
            window_tokens=window,
            reads=reads,
            counter=chosen,
            progress=lambda msg: status.update(msg),
        )
        rows = (
            _b().run_writer_bench(
                ledger or [],
                counts,
                total_steps=writer_steps,
                progress=lambda msg: status.update(msg),
            )
            if counts
            else []
        )
        sizes = (
            _b().run_size_bench(
                _b().find_transcripts(transcripts),
                postgres=ledger or [],
                progress=lambda msg: status.update(msg),
            )
            if transcripts
            else []
        )
    if as_json:
        emit_json(
            result.as_dict()
            | {"writers": [r.as_dict() for r in rows], "sizes": [r.as_dict() for r in sizes]}
        )
        return
    _print_ledger(result, rows, sizes)


def _print_ledger(result: Any, rows: list[Any], sizes: list[Any]) -> None:
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
        "tail read p50 / p99, cold (decode every body)",
        f"{result.tail_cold_p50_ms:.2f} ms / {result.tail_cold_p99_ms:.2f} ms",
    )
    table.add_row(
        "tail read p50 / p99, warm (entry cache)",
        f"{result.tail_p50_ms:.2f} ms / {result.tail_p99_ms:.2f} ms",
    )
    table.add_row("token counting", f"{result.counting_mb_per_s:.1f} MB/s")
    table.add_row(
        "raw sqlite3, same run: one-row commits",
        f"{result.raw_one_row_commits_per_s:,.0f} commits/s",
    )
    table.add_row(
        "raw sqlite3, same run: these steps' bodies, 1 tx/step",
        f"{result.raw_steps_per_s:,.0f} steps/s "
        f"(comal {result.append_steps_per_s / result.raw_steps_per_s:.2f}x of it)",
    )
    out.print(table)
    if rows:
        wt = Table("backend", "writers", "steps", "steps/s", "p50 ms", "p99 ms", "max ms",
                   title="concurrent writers, one session each")  # fmt: skip
        for r in rows:
            wt.add_row(r.backend, str(r.writers), f"{r.steps:,}", f"{r.steps_per_s:,.0f}",
                       f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", f"{r.max_ms:.1f}")  # fmt: skip
        out.print(wt)
    if sizes:
        st = Table("backend", "bodies", "transcripts MB", "entries", "ledger bytes", "bytes/MB",
                   title="ledger size per MB of imported transcript")  # fmt: skip
        for z in sizes:
            st.add_row(z.backend, z.bodies, f"{z.transcript_mb:.2f}", f"{z.entries:,}",
                       f"{z.ledger_bytes:,}", f"{z.bytes_per_mb:,.0f}")  # fmt: skip
        out.print(st)


def _numbers(text: str, option: str, *, least: int, most: int | None = None) -> list[int]:
    """A comma-separated list of whole numbers (``1,8,32``; ``128_000`` allowed), each from
    ``least`` to ``most``; anything else is a coded error naming ``option``."""
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < least or (most is not None and max(values) > most):
        span = f"from {least:,} to {most:,}" if most is not None else f"of at least {least:,}"
        raise UserError(
            f"{option} takes whole numbers {span} separated by commas (e.g. 1,8,32), not {text!r}"
        )
    return values


@app.command("context")
def context_bench(
    entries: Annotated[
        str, typer.Option(help="Session sizes to compare, comma-separated.")
    ] = "2000,20000",
    window: Annotated[int, typer.Option(help="Window to assemble.", min=1000)] = 128_000,
    turns: Annotated[int, typer.Option(help="Turns to time per size.", min=10)] = 100,
    engine: Annotated[str, typer.Option(help="Context engine from the registry.")] = "limit",
    as_json: JsonOpt = False,
) -> None:
    """Per-turn time to read the view from the ledger and assemble a window, on sessions grown
    with the engine running (so they carry the stand-ins an agent would have).

    Example: comal bench context --entries 2000,20000 --window 128000
    """
    results = []
    for size in _numbers(entries, "--entries", least=1):
        with err.status(f"context bench, {size:,} entries") as status:
            results.append(
                _b().run_context_bench(
                    entries=size,
                    window=window,
                    measure=turns,
                    engine=engine,
                    progress=lambda msg: status.update(msg),
                )
            )
    if as_json:
        emit_json([r.as_dict() for r in results])
        return
    table = Table(
        "entries", "tokens", "checkpoints", "summaries", "p50 ms", "p99 ms", "last ms", "view p50",
        "assemble p50", "input", title=f"assembling a {window:,}-token window per turn",
    )  # fmt: skip
    for r in results:
        table.add_row(
            f"{r.entries:,}", f"{r.session_tokens:,}", str(r.checkpoints), str(r.summaries),
            f"{r.p50_ms:.2f}",
            f"{r.p99_ms:.2f}", f"{r.last_ms:.2f}", f"{r.view_p50_ms:.2f}",
            f"{r.assemble_p50_ms:.2f}", f"{r.input_tokens_last:,}",
        )  # fmt: skip
    out.print(table)


@app.command("turn")
def turn_bench(
    at: Annotated[str, typer.Option(help="Session sizes in turns, comma-separated.")] = "100,5000",
    imported: Annotated[
        int, typer.Option(help="Requests of an imported history in the same tenant.", min=0)
    ] = 40_000,
    turns: Annotated[int, typer.Option(help="Turns to time per size.", min=5)] = 30,
    as_json: JsonOpt = False,
) -> None:
    """Per-turn overhead of the agent loop (everything but the model call) at two session
    sizes, in a ledger that also holds an imported history: flat means a ratio near 1.

    Example: comal bench turn --at 100,5000 --imported 40000
    """
    sizes = _numbers(at, "--at", least=1)
    with err.status("turn bench") as status:
        results = _b().run_turn_bench(
            at=sizes, imported=imported, measure=turns, progress=lambda m: status.update(m)
        )
    if as_json:
        emit_json([r.as_dict() for r in results])
        return
    table = Table("turn", "entries", "imported requests", "p50 ms", "p90 ms", "max ms")
    for r in results:
        table.add_row(
            f"{r.turn:,}", f"{r.entries:,}", f"{r.imported_requests:,}", f"{r.p50_ms:.2f}",
            f"{r.p90_ms:.2f}", f"{r.max_ms:.2f}",
        )  # fmt: skip
    out.print(table)
    if len(results) >= 2 and results[0].p50_ms > 0:
        out.print(f"ratio p50 {results[-1].p50_ms / results[0].p50_ms:.2f} (1.0 is flat)")


@app.command("recall")
def recall_bench(
    transcripts: Annotated[list[Path], typer.Argument(help="LoCoMo conversation files.")],
    window: Annotated[int, typer.Option(help="Context window in tokens.", min=1_000)] = 16_000,
    k: Annotated[
        str, typer.Option("--k", help="Cut-offs for recall@k, comma-separated.")
    ] = "1,5,10",
    as_json: JsonOpt = False,
) -> None:
    """For every LoCoMo QA item, at the end of the conversation: is each evidence turn verbatim
    in the context comal-limit and comal-dag assemble, and among the top k of ctx_search
    (question)? A BM25 peer (rank_bm25) ranks the same turns in this process. Across
    sessions: the conversation split into its sessions of one agent, is it among the top k of
    memory_search (memories and past sessions), and of each of its two rankings alone?

    Example: comal bench recall ../shared/corpus/locomo/*.json --window 16000 --json
    """
    from ..bench._recall import run_recall

    with coded_errors(as_json):
        ks = sorted(set(_numbers(k, "--k", least=1)))
        with err.status("recall") as status:
            rows = run_recall(transcripts, window=window, ks=ks, progress=status.update)
    runs = [r.as_dict() for r in rows]
    if as_json:
        emit_json({"runs": runs})
        return
    table = Table(
        "transcript", "strategy", "window", "items", "in context",
        *(f"recall@{n}" for n in ks), title="evidence recall (LoCoMo)",
    )  # fmt: skip
    for r in runs:
        ctx = "—" if r["in_context"] is None else f"{r['in_context']:.1%}"
        table.add_row(
            r["transcript"], r["strategy"], f"{r['window']:,}", str(r["items"]), ctx,
            *(f"{r['recall_at'][str(n)]:.1%}" for n in ks),
        )  # fmt: skip
    out.print(table)


@app.command("compare")
def compare_bench(
    transcripts: Annotated[
        list[Path] | None, typer.Argument(help="Transcript files, or folders to search.")
    ] = None,
    windows: Annotated[
        str, typer.Option(help="Context windows in tokens, comma-separated.")
    ] = "32000,128000",
    strategies: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated, from: full; comal-ENGINE for each engine of the registry "
            "(comal-limit, comal-dag, comal-pipeline, and any a plugin adds), optionally "
            "comal-ENGINE:SETTING=VALUE; masking-N; langchain-trim; langchain-context-editing; "
            "langchain-summarization[:trigger=F]. Default: full, every comal-ENGINE, masking-5, "
            "langchain-trim and langchain-summarization (the langchain ones need the bench "
            "extra)."
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for report.md, report.json and the PNG plots."),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option("--quick", help="Only the transcript with the most calls, first window."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Replay transcripts through comal and its peers side by side: tokens sent, simulated cost
    with prompt caching, pair integrity, retention of tool outputs, and assembly speed.

    Every strategy is replayed in this process on the same entries; one counter prices them all.
    See docs/bench.md for how each column is measured.

    Example: comal bench compare ../shared/corpus --windows 32000,128000 --out bench-out
    """
    with coded_errors(as_json):
        if not transcripts:
            raise UserError("give transcript files or folders, e.g. comal bench compare runs/")
        sizes = _numbers(windows, "--windows", least=1_000)
        names = [s.strip() for s in strategies.split(",") if s.strip()] if strategies else None
        report_to = None if out_dir is None else Output.prepare(out_dir, "--out", folder=True)
        with err.status("comparing") as status:
            report = _b().run_compare(
                transcripts,
                windows=sizes,
                strategies=names,
                quick=quick,
                progress=lambda msg: status.update(msg),
            )
        if report_to is not None:
            command = " ".join(
                ["comal bench compare", *map(str, transcripts), "--windows", windows]
                + (["--strategies", strategies] if strategies else [])
                + ["--out", str(out_dir)]
                + (["--quick"] if quick else [])
            )
            with report_to.writing() as folder:
                written = _b().write_report(report, folder, command=command)
            for path in written:
                err.print(f"wrote {path}", markup=False)
            if not any(p.suffix == ".png" for p in written):
                err.print("plots skipped: install matplotlib (comal[bench])", markup=False)
    if as_json:
        emit_json(report.summary())
        return
    long = _b().long_runs(report.runs)
    groups = [(f"{len(report.transcripts)} transcript(s)", report.runs)]
    if long and len(long) < len(report.runs):
        count = len({r.transcript for r in long})
        groups.append((f"{count} long, tool-heavy transcript(s)", long))
    for title, runs in groups:
        out.print(_compare_table(f"{title}, counter {report.counter}", runs))
    for rate in report.survival:
        out.print(
            f"comal-dag exact-value survival at {rate['window']:,}: {rate['values']:,} values in "
            f"{rate['chunks']} summarized chunks; {rate['in_summary']:.1%} in the summary, "
            f"{rate['reachable']:.1%} of {rate['searched']:,} looked up reachable with one "
            f"ctx_search within the summary ({rate['reachable_session']:.1%} session-wide)"
        )
    for check in report.task_state:
        lacks = ", ".join(check["missing"]) or "nothing"
        out.print(
            f"task state under comal-{check['engine']} at {check['window']:,}: "
            f"{check['held_everything']} of {check['requests_after_compaction']} requests after "
            f"the first compaction held all of it (lacking: {lacks})",
            markup=False,
        )
    for note in report.notes:
        err.print(f"note: {note}", markup=False, highlight=False)


def _compare_table(title: str, runs: Sequence[Any]) -> Table:
    table = Table(
        "window", "strategy", "calls", "tokens sent", "peak", *(f"$ {p}" for p in _b().PROVIDERS),
        "× full", "cache hit", "cold", "split", "over", "empty", "verbatim/ref/recov/lost",
        "p50 ms", "p99 ms", title=title,
    )  # fmt: skip
    made = _b().totals(runs)
    full = {t.window: t.cost_usd["anthropic"] for t in made if t.strategy == "full"}
    for t in made:
        base = full.get(t.window)
        table.add_row(
            f"{t.window:,}", t.strategy, f"{t.calls:,}", f"{t.tokens_sent:,}",
            f"{t.peak_input:,}", *(f"{t.cost_usd[p]:.2f}" for p in _b().PROVIDERS),
            f"{t.cost_usd['anthropic'] / base:.2f}" if base else "—",
            f"{t.cache_hit:.1%}", str(t.cold), str(t.split_pairs), str(t.over_window),
            str(t.empty), "/".join(str(v) for v in t.retention.values()), f"{t.p50_ms:.3f}",
            f"{t.p99_ms:.3f}",
        )  # fmt: skip
    return table


@app.command("proxy")
def proxy_bench(
    clients: Annotated[int, typer.Option(help="Concurrent conversations.", min=1)] = 32,
    turns: Annotated[int, typer.Option(help="Requests per conversation.", min=1)] = 20,
    stream: Annotated[bool, typer.Option(help="Streamed replies (SSE relay).")] = False,
    context_window: Annotated[
        int | None, typer.Option(help="The proxy's --context-window (small: recall offered).")
    ] = None,
    pad: Annotated[int, typer.Option(help="Filler words in each user message.", min=0)] = 0,
    workers: Annotated[
        int | None,
        typer.Option(
            help="comal serve --workers: processes behind one socket (default 1; with "
            "--concurrency, the second comal row's, default one per core, at least 2).",
            min=1,
        ),
    ] = None,
    concurrency: Annotated[
        str | None,
        typer.Option(
            help="Compare paths at these concurrencies (comma-separated client counts): "
            "direct, LiteLLM, comal with 1 worker and with --workers.",
        ),
    ] = None,
    compare: Annotated[
        bool, typer.Option(help="The comparison at the default concurrencies 1,8,32,64.")
    ] = False,
    litellm: Annotated[
        str | None,
        typer.Option(
            help="LiteLLM's `litellm` command, a python that imports it, or a venv "
            "(default: build/litellm, made by `make litellm`).",
        ),
    ] = None,
    litellm_workers: Annotated[
        int, typer.Option(help="LiteLLM's --num_workers in the comparison.", min=1)
    ] = 1,
    pool_per_client: Annotated[
        bool,
        typer.Option(
            help="Each client its own connection pool, as each agent has its own HTTP client; "
            "--no-pool-per-client shares one among them, whose queue at high concurrency is "
            "the load generator's, not the proxy's.",
        ),
    ] = True,
    as_json: JsonOpt = False,
) -> None:
    """Concurrent clients through `comal serve` and straight to FakeServer, in one run: added
    latency p50/p99, and the ledger's count of requests (none lost or duplicated).

    With --concurrency (or --compare) it compares, against one FakeServer, going straight to
    it, through LiteLLM's proxy (a subprocess from build/litellm; its rows say why when it is
    not installed) and through comal serve with one worker and with --workers, at each
    concurrency: --turns requests per client.

    Example: comal bench proxy --clients 32 --turns 20 --workers 2

    Example: comal bench proxy --concurrency 1,8,32,64 --turns 10
    """
    from ..bench._proxy import run_proxy_bench
    from ..bench._proxy_compare import DEFAULT_CONCURRENCY

    if concurrency is not None or compare:
        levels: tuple[int, ...] = DEFAULT_CONCURRENCY
        if concurrency is not None:
            levels = tuple(_numbers(concurrency, "--concurrency", least=1))
        _proxy_comparison(
            levels, turns, stream, workers, litellm, litellm_workers, pool_per_client, as_json
        )
        return

    with err.status("benchmarking") as status:
        result = run_proxy_bench(
            clients=clients,
            turns=turns,
            stream=stream,
            context_window=context_window,
            pad=pad,
            workers=workers or 1,
            pool_per_client=pool_per_client,
            progress=lambda m: status.update(m),
        )
    if as_json:
        emit_json(result.as_dict())
        return
    table = Table("measure", "value", title=f"proxy: {clients} clients x {turns} turns")
    for name, value in result.as_dict().items():
        table.add_row(
            name.replace("_", " "),
            f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value),
        )
    out.print(table)


def _proxy_comparison(
    levels: tuple[int, ...],
    turns: int,
    stream: bool,
    workers: int | None,
    litellm: str | None,
    litellm_workers: int,
    pool_per_client: bool,
    as_json: bool,
) -> None:
    from ..bench._proxy_compare import run_proxy_comparison

    with err.status("benchmarking") as status:
        result = run_proxy_comparison(
            concurrency=levels,
            turns=turns,
            stream=stream,
            workers=workers,
            litellm=litellm,
            litellm_workers=litellm_workers,
            pool_per_client=pool_per_client,
            progress=lambda m: status.update(m),
        )
    if as_json:
        emit_json(result.as_dict())
        return
    title = f"proxy paths: {turns} turns a client{', streamed' if stream else ''}"
    title += ", a connection pool per client" if result.pool_per_client else ""
    table = Table(
        "path", "clients", "workers", "p50 ms", "p99 ms", "added p50", "added p99",
        "sent", "upstream", "recorded", "failures", title=title,
    )  # fmt: skip

    def added(value: float | None) -> str:
        return "" if value is None else f"{value:+,.1f}"

    skipped: dict[str, str] = {}
    for r in result.rows:
        if r.skipped is not None:
            skipped[r.path] = r.skipped
            continue
        table.add_row(
            r.path, str(r.concurrency), str(r.workers), f"{r.p50_ms:,.1f}", f"{r.p99_ms:,.1f}",
            added(r.added_p50_ms), added(r.added_p99_ms), f"{r.requests_sent:,}",
            f"{r.reached_upstream:,}", "" if r.recorded is None else f"{r.recorded:,}",
            str(r.failures),
        )  # fmt: skip
    out.print(table)
    out.print(f"comal entries recorded twice: {result.duplicated_entries}; wall {result.wall_s} s")
    for path, why in skipped.items():
        err.print(f"{path}: skipped: {why}", markup=False, highlight=False)
