"""Writing a :class:`~comal.bench.CompareReport`: report.md, report.json and two PNG plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._compare import CompareReport, RunResult, percentile
from ._cost import PROVIDERS

__all__ = [
    "LONG_CALLS",
    "Totals",
    "long_runs",
    "markdown_report",
    "summary_table",
    "totals",
    "write_report",
]

_FATES = ("verbatim", "referenced", "recoverable", "lost")
# The long, tool-heavy runs reported apart: at least this many model calls and tool outputs
# (the kind of transcript a window must be managed for; short ones fit as they are).
LONG_CALLS = 20
# Strategies often send identical requests (every one does while the history fits), so their
# lines lie on top of each other: distinct dashes and widths keep each one visible.
_STYLES = (("-", 3.0), ("--", 2.0), ("-.", 1.6), (":", 1.6), ("-", 0.8))


def _style(strategies: Sequence[str], name: str) -> dict[str, object]:
    dash, width = _STYLES[strategies.index(name) % len(_STYLES)]
    return {"linestyle": dash, "linewidth": width, "label": name}


@dataclass(frozen=True, slots=True)
class Totals:
    """Every run of one window and strategy, added up over the transcripts."""

    window: int
    strategy: str
    calls: int
    tokens_sent: int
    peak_input: int
    cost_usd: dict[str, float]
    cache_hit: float
    cold: int
    split_pairs: int
    orphans: int
    over_window: int
    empty: int
    errors: int
    retention: dict[str, int]
    p50_ms: float
    p99_ms: float
    peak_memory_kb: float


def totals(runs: Sequence[RunResult]) -> list[Totals]:
    """One :class:`Totals` per (window, strategy), in the order the runs came."""
    keys: dict[tuple[int, str], list[RunResult]] = {}
    for run in runs:
        keys.setdefault((run.window, run.strategy), []).append(run)
    out = []
    for (window, strategy), group in keys.items():
        sent = sum(r.tokens_sent for r in group)
        times = sorted(t.ms for r in group for t in r.turns)
        summaries = [r.summary() for r in group]
        out.append(
            Totals(
                window=window,
                strategy=strategy,
                calls=sum(len(r.turns) for r in group),
                tokens_sent=sent,
                peak_input=max(r.peak_input for r in group),
                cost_usd={p: sum(r.cost_usd[p] for r in group) for p in PROVIDERS},
                cache_hit=sum(r.cached for r in group) / sent if sent else 0.0,
                cold=sum(r.cold for r in group),
                split_pairs=sum(s["split_pairs"] for s in summaries),
                orphans=sum(s["orphans"] for s in summaries),
                over_window=sum(s["over_window"] for s in summaries),
                empty=sum(s["empty_requests"] for s in summaries),
                errors=sum(s["errors"] for s in summaries),
                retention={f: sum(r.retention[f] for r in group) for f in _FATES},
                p50_ms=percentile(times, 0.5),
                p99_ms=percentile(times, 0.99),
                peak_memory_kb=max(r.peak_memory_kb for r in group),
            )
        )
    return out


def long_runs(runs: Sequence[RunResult]) -> list[RunResult]:
    """The runs of long, tool-heavy transcripts: at least :data:`LONG_CALLS` model calls and
    as many tool outputs."""
    return [
        r for r in runs if len(r.turns) >= LONG_CALLS and sum(r.retention.values()) >= LONG_CALLS
    ]


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right_from: int) -> str:
    align = ["---" if i < right_from else "--:" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def summary_table(report: CompareReport, runs: Sequence[RunResult] | None = None) -> str:
    """The totals per window and strategy over ``runs`` (all of the report's by default), as
    a markdown table; ``× full`` is the Anthropic cost against the ``full`` row's."""
    head = [
        "window", "strategy", "calls", "tokens sent", "peak input", "$ Anthropic", "× full",
        "$ OpenAI", "$ Gemini", "cache hit", "cold", "split pairs", "orphans", "over window",
        "empty", "verbatim", "referenced", "recoverable", "lost", "p50 ms", "p99 ms", "peak KB",
    ]  # fmt: skip
    rows = []
    made = totals(report.runs if runs is None else runs)
    full = {t.window: t.cost_usd["anthropic"] for t in made if t.strategy == "full"}
    for t in made:
        base = full.get(t.window)
        ratio = f"{t.cost_usd['anthropic'] / base:.2f}" if base else "—"
        row = [
            f"{t.window // 1000}k", t.strategy, f"{t.calls:,}", f"{t.tokens_sent:,}",
            f"{t.peak_input:,}", _usd(t.cost_usd["anthropic"]), ratio,
            *(_usd(t.cost_usd[p]) for p in PROVIDERS[1:]),
            f"{t.cache_hit:.1%}", str(t.cold), str(t.split_pairs), str(t.orphans),
            str(t.over_window), str(t.empty), *(f"{t.retention[f]:,}" for f in _FATES),
            f"{t.p50_ms:.3f}", f"{t.p99_ms:.3f}", f"{t.peak_memory_kb:,.0f}",
        ]  # fmt: skip
        rows.append(row)
    return _table(head, rows, 2)


def runs_table(runs: Sequence[RunResult]) -> str:
    """One row per transcript, window and strategy."""
    head = [
        "transcript", "window", "strategy", "calls", "tokens sent", "peak input", "$ Anthropic",
        "$ OpenAI", "$ Gemini", "cache hit", "split", "orphans", "over", "empty",
        "verbatim / ref / recoverable / lost", "p50 / p99 / last ms", "peak KB",
    ]  # fmt: skip
    rows = []
    for r in runs:
        s = r.summary()
        ms = s["assembly_ms"]
        row = [
            r.transcript, f"{r.window // 1000}k", r.strategy, str(s["turns"]),
            f"{r.tokens_sent:,}", f"{r.peak_input:,}",
            *(_usd(r.cost_usd[p]) for p in PROVIDERS), f"{r.cache_hit:.1%}",
            str(s["split_pairs"]), str(s["orphans"]), str(s["over_window"]),
            str(s["empty_requests"]), " / ".join(str(r.retention[f]) for f in _FATES),
            f"{ms['p50']:.3f} / {ms['p99']:.3f} / {ms['last']:.3f}",
            f"{r.peak_memory_kb:,.0f}",
        ]  # fmt: skip
        rows.append(row)
    return _table(head, rows, 3)


_PLOT_TITLES = {
    "tokens_per_turn.png": "input tokens per model call, the transcript with the most calls",
    "cumulative_cost.png": "cumulative cost per provider, all transcripts",
}


def markdown_report(
    report: CompareReport, command: str | None = None, plots: Sequence[str] = ()
) -> str:
    """The report; ``plots`` are the file names of the plots written beside it, linked by
    their relative names so the folder reads the same wherever it is moved."""
    prices = "\n".join(
        f"- {p}: {t.model}, ${t.input}/Mtok input, ${t.cache_read} cache read, "
        + (f"${t.cache_write} cache write" if t.cache_write is not None else "no write premium")
        for p, t in report.prices.items()
    )
    parts = [
        "# comal bench compare",
        f"Produced by `{command}`." if command else "",
        f"Counter: **{report.counter}** (one counter for every strategy). "
        f"Windows: {', '.join(f'{w:,}' for w in report.windows)}. "
        f"Strategies: {', '.join(report.strategies)}. "
        f"{len(report.transcripts)} transcript(s); {report.elapsed_s:.1f} s.",
        "Prices (list, per million input tokens):\n\n" + prices,
        "How each column is measured: docs/bench.md.",
        "## Totals over all transcripts\n\n" + summary_table(report),
        _long_section(report),
        "\n".join(f"![{_PLOT_TITLES.get(name, name)}]({name})" for name in plots),
        "## Per transcript\n\n" + runs_table(report.runs),
    ]
    if report.survival:
        parts.append(
            "## Exact values of summarized chunks (comal-dag)\n\n"
            + "\n".join(
                f"- {r['window']:,}: {r['values']:,} values in {r['chunks']} chunks; "
                f"{r['in_summary']:.1%} in the summary; of {r['searched']:,} looked up, "
                f"{r['reachable']:.1%} one ctx_search within the summary away "
                f"({r.get('reachable_session', 0):.1%} session-wide)"
                for r in report.survival
            )
        )
    if report.task_state:
        parts.append(
            "## The task after compaction (a scripted coordinator, docs/long-work.md)\n\n"
            + "\n".join(
                f"- comal-{c['engine']} at {c['window']:,}: {c['held_everything']} of "
                f"{c['requests_after_compaction']} requests after the first compaction held "
                f"all of it; lacking: {', '.join(c['missing']) or 'nothing'}"
                for c in report.task_state
            )
        )
    if report.notes:
        parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in report.notes))
    return "\n\n".join(p for p in parts if p) + "\n"


def _long_section(report: CompareReport) -> str:
    long = long_runs(report.runs)
    if not long:
        return ""
    names = len({r.transcript for r in long})
    return (
        f"## Long, tool-heavy transcripts ({names} with at least {LONG_CALLS} model calls and "
        f"{LONG_CALLS} tool outputs)\n\n" + summary_table(report, long)
    )


def _featured(report: CompareReport) -> str | None:
    calls: dict[str, int] = {}
    for r in report.runs:
        calls[r.transcript] = len(r.turns)
    return max(calls, key=lambda k: calls[k]) if calls else None


def _plots(report: CompareReport, out: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError:  # an optional extra (comal[bench]); the tables do not need it
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    featured = _featured(report)
    if featured is None:
        return []
    windows = list(report.windows)
    made = []
    fig, axes = plt.subplots(1, len(windows), figsize=(7 * len(windows), 4.5), squeeze=False)
    for ax, window in zip(axes[0], windows, strict=True):
        shown = [r for r in report.runs if r.transcript == featured and r.window == window]
        for r in shown:
            style = _style(report.strategies, r.strategy)
            ax.plot([t.turn for t in r.turns], [t.tokens for t in r.turns], **style)
        if shown:
            limit = shown[0].input_limit
            ax.axhline(limit, color="grey", linestyle="--", linewidth=1, label="input limit")
        ax.set_title(f"{featured} at {window:,}")
        ax.set_xlabel("model call")
        ax.set_ylabel(f"input tokens ({report.counter})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    made.append(out / "tokens_per_turn.png")
    fig.savefig(made[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(
        len(PROVIDERS), len(windows), figsize=(7 * len(windows), 3.6 * len(PROVIDERS)),
        squeeze=False,
    )  # fmt: skip
    for row, provider in zip(axes, PROVIDERS, strict=True):
        for ax, window in zip(row, windows, strict=True):
            for strategy in report.strategies:
                running, ys = 0.0, []
                for r in report.runs:
                    if r.window == window and r.strategy == strategy:
                        for t in r.turns:
                            running += t.usd[provider]
                            ys.append(running)
                ax.plot(range(1, len(ys) + 1), ys, **_style(report.strategies, strategy))
            table = report.prices[provider]
            ax.set_title(f"{provider} ({table.model}) at {window:,}, all transcripts")
            ax.set_xlabel("model call (transcripts one after another)")
            ax.set_ylabel("cumulative $")
            ax.legend(fontsize=8)
    fig.tight_layout()
    made.append(out / "cumulative_cost.png")
    fig.savefig(made[-1], dpi=110)
    plt.close(fig)
    return made


def write_report(
    report: CompareReport, out: Path, *, command: str | None = None, plots: bool = True
) -> list[Path]:
    """Write report.md, report.json and, where matplotlib is installed, the plots into ``out``;
    returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = _plots(report, out) if plots else []
    written = [out / "report.md", out / "report.json"]
    markdown = markdown_report(report, command, [p.name for p in drawn])
    written[0].write_text(markdown, encoding="utf-8")
    data = report.as_dict()
    data["command"] = command
    written[1].write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return written + drawn
