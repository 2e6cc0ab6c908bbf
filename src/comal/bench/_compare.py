"""``comal bench compare``: replay transcripts through comal and its peers, side by side.

Each transcript is imported into a scratch ledger once. For every window and strategy the
harness walks the model calls of the original run in order, asks the strategy for the request it
would send (timing only that call), and prices, checks and records what came back with the same
counter and the same rules for all (:mod:`._cost`, :mod:`._integrity`). After the last call the
fate of every tool output is classified (:mod:`._retention`). Peak memory is measured in a
separate pass of the strategy alone under ``tracemalloc``, which slows every allocation and
would distort the timings if they shared a pass.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..messages import Message, Role
from ..tokens import Budget, TokenCounter, default_counter
from ._context_editing import context_editing_available
from ._corpus import find_transcripts, load_sessions, scratch_ledger
from ._cost import PROVIDERS, CostMeter, Pricer, PriceTable, load_prices
from ._integrity import PairLedger
from ._langchain import langchain_available
from ._retention import classify_retention, retention_counts
from ._strategies import (
    FRAMEWORKS_UNRUN,
    OPENHANDS_UNAVAILABLE,
    Session,
    Strategy,
    default_strategies,
    make_strategy,
)

__all__ = [
    "CompareReport",
    "RunResult",
    "TurnStat",
    "run_compare",
    "run_strategy",
]

_INSTRUCTIONS = (Role.SYSTEM, Role.DEVELOPER)


@dataclass(frozen=True, slots=True)
class TurnStat:
    """One model call of one run: what was sent, what it cost, how long assembling it took."""

    turn: int
    seq: int
    tokens: int
    cached: int
    usd: dict[str, float]
    ms: float
    over: bool
    split: int
    orphans: int
    empty: bool = False  # nothing but instructions: no provider accepts a request without messages
    error: str | None = None
    uncached_usd: dict[str, float] = field(default_factory=dict)  # the same with no caching
    cold: bool = False  # the cache had expired since the previous request (its lifetime passed)


def percentile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


@dataclass(frozen=True, slots=True)
class RunResult:
    """One transcript × window × strategy."""

    transcript: str
    window: int
    strategy: str
    input_limit: int
    turns: tuple[TurnStat, ...]
    retention: dict[str, int]
    peak_memory_kb: float
    # Time the strategy spent on work a live agent runs off its turns (a deferred compaction's
    # summaries): not in the assembly times.
    background_ms: float = 0.0

    @property
    def tokens_sent(self) -> int:
        return sum(t.tokens for t in self.turns)

    @property
    def peak_input(self) -> int:
        return max((t.tokens for t in self.turns), default=0)

    @property
    def cached(self) -> int:
        return sum(t.cached for t in self.turns)

    @property
    def cost_usd(self) -> dict[str, float]:
        return {p: sum(t.usd.get(p, 0.0) for t in self.turns) for p in PROVIDERS}

    @property
    def saved_vs_uncached(self) -> dict[str, float]:
        """CCH-2 ``savedVsUncached``: dollars caching saved against sending every request
        uncached at the base input rate (negative when cache writes cost more than they
        saved)."""
        return {
            p: sum(t.uncached_usd.get(p, 0.0) - t.usd.get(p, 0.0) for t in self.turns)
            for p in PROVIDERS
        }

    @property
    def cache_hit(self) -> float:
        return self.cached / self.tokens_sent if self.tokens_sent else 0.0

    @property
    def cold(self) -> int:
        """Requests that found the cache expired (priced as written in full)."""
        return sum(1 for t in self.turns if t.cold)

    @property
    def assembly_ms(self) -> dict[str, float]:
        times = [t.ms for t in self.turns]
        ordered = sorted(times)
        return {
            "p50": statistics.median(ordered) if ordered else 0.0,
            "p99": percentile(ordered, 0.99),
            "last": times[-1] if times else 0.0,
        }

    def summary(self) -> dict[str, Any]:
        """The ``--json`` record of this run."""
        return {
            "transcript": self.transcript,
            "window": self.window,
            "strategy": self.strategy,
            "turns": len(self.turns),
            "tokens_sent": self.tokens_sent,
            "peak_input": self.peak_input,
            "cost_usd": {p: round(v, 6) for p, v in self.cost_usd.items()},
            "cache_hit": round(self.cache_hit, 6),
            "cold_requests": self.cold,
            "saved_vs_uncached_usd": {p: round(v, 6) for p, v in self.saved_vs_uncached.items()},
            "split_pairs": sum(t.split for t in self.turns),
            "orphans": sum(t.orphans for t in self.turns),
            "over_window": sum(1 for t in self.turns if t.over),
            "empty_requests": sum(1 for t in self.turns if t.empty),
            "errors": sum(1 for t in self.turns if t.error),
            "retention": dict(self.retention),
            "assembly_ms": {k: round(v, 4) for k, v in self.assembly_ms.items()},
            "background_ms": round(self.background_ms, 3),
            "peak_memory_kb": round(self.peak_memory_kb, 1),
        }

    def as_dict(self) -> dict[str, Any]:
        """Every number, per call included, for report.json."""
        out = self.summary()
        out["input_limit"] = self.input_limit
        out["per_turn"] = {
            "seq": [t.seq for t in self.turns],
            "tokens": [t.tokens for t in self.turns],
            "cached": [t.cached for t in self.turns],
            "usd": {p: [round(t.usd.get(p, 0.0), 8) for t in self.turns] for p in PROVIDERS},
            "uncached_usd": {
                p: [round(t.uncached_usd.get(p, 0.0), 8) for t in self.turns] for p in PROVIDERS
            },
            "assembly_ms": [round(t.ms, 4) for t in self.turns],
            "over_window": [t.over for t in self.turns],
            "split_pairs": [t.split for t in self.turns],
            "orphans": [t.orphans for t in self.turns],
            "empty": [t.empty for t in self.turns],
            "cold": [t.cold for t in self.turns],
            "error": [t.error for t in self.turns],
        }
        return out


def _timed(requests: Iterator[Any]) -> Iterator[tuple[Any, float]]:
    """Each item with the milliseconds the iterator took to produce it."""
    while True:
        t0 = time.perf_counter()
        try:
            item = next(requests)
        except StopIteration:
            return
        yield item, (time.perf_counter() - t0) * 1000


def _peak_kb(strategy: Strategy, session: Session, budget: Budget) -> float:
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    for _ in strategy.requests(session, budget):
        pass
    peak = tracemalloc.get_traced_memory()[1]
    if not was_tracing:
        tracemalloc.stop()
    return max(0, peak - base) / 1024


def run_strategy(
    strategy: Strategy,
    session: Session,
    budget: Budget,
    pricer: Pricer,
    tables: dict[str, PriceTable],
    *,
    memory: bool = True,
) -> RunResult:
    """Replay ``session`` through ``strategy``; see the module docstring."""
    peak_kb = _peak_kb(strategy, session, budget) if memory else 0.0
    meter = CostMeter(tables, session.ttl)
    history = [e.message for e in session.entries]
    pairs = PairLedger()
    turns: list[TurnStat] = []
    last: tuple[Message, ...] | None = None
    indices = session.turns
    background = 0.0
    sent_iter = _timed(strategy.requests(session, budget))
    for n, (index, (sent, took)) in enumerate(zip(indices, sent_iter, strict=False), 1):
        seq = session.entries[index].seq
        ms = max(0.0, took - sent.background_ms)  # what the live turn pays
        background += sent.background_ms
        if sent.messages is None:
            zero = dict.fromkeys(PROVIDERS, 0.0)
            turns.append(
                TurnStat(n, seq, 0, 0, zero, ms, False, 0, 0, error=sent.error or "nothing sent")
            )
            continue
        pairs.extend(history[:index])
        cost = meter.add(pricer.units(sent.messages), session.sent_at(index))
        check = pairs.check(sent.messages)
        over = cost.tokens > budget.input_limit
        empty = all(m.role in _INSTRUCTIONS for m in sent.messages)
        stat = TurnStat(
            n, seq, cost.tokens, cost.cached, cost.usd, ms, over, check.split, check.orphans,
            empty, uncached_usd=cost.uncached_usd, cold=cost.cold,
        )  # fmt: skip
        turns.append(stat)
        last = sent.messages
    if len(turns) != len(indices):
        raise RuntimeError(
            f"strategy {strategy.name} answered {len(turns)} of {len(indices)} calls "
            f"in {session.name}"
        )
    # Every output before the final call of the original run is classified, whatever the
    # strategy did, so the four counts add up to the same total for every strategy; the request
    # is the last one the strategy actually sent (a final turn that failed sent nothing).
    final = indices[-1] if indices else 0
    outputs = [
        (e, o.tool_result.text)
        for e, o in zip(session.entries[:final], session.originals[:final], strict=True)
        if o.tool_result is not None
    ]
    request = last if last is not None else ()
    store_ = session.store if strategy.keeps_store else None
    retention = retention_counts(classify_retention(outputs, request, store_, session.scope))
    return RunResult(
        session.name,
        budget.window,
        strategy.name,
        budget.input_limit,
        tuple(turns),
        retention,
        peak_kb,
        background,
    )


@dataclass(frozen=True, slots=True)
class CompareReport:
    counter: str
    windows: tuple[int, ...]
    strategies: tuple[str, ...]
    runs: tuple[RunResult, ...]
    prices: dict[str, PriceTable]
    notes: tuple[str, ...] = ()
    elapsed_s: float = 0.0
    quick: bool = False
    transcripts: tuple[str, ...] = field(default=())
    # The dag engine's exact-value survival rate per window (bench/_survival.py), when it ran.
    survival: tuple[dict[str, Any], ...] = ()
    # Whether the task survives each engine's compaction (bench/_task_state.py), when one ran.
    task_state: tuple[dict[str, Any], ...] = ()

    def summary(self) -> dict[str, Any]:
        """The ``--json`` output."""
        out = {"counter": self.counter, "runs": [r.summary() for r in self.runs]}
        if self.survival:
            out["survival"] = list(self.survival)
        if self.task_state:
            out["task_state"] = list(self.task_state)
        return out

    def as_dict(self) -> dict[str, Any]:
        """Everything, for report.json."""
        return {
            "counter": self.counter,
            "windows": list(self.windows),
            "strategies": list(self.strategies),
            "transcripts": list(self.transcripts),
            "quick": self.quick,
            "elapsed_s": round(self.elapsed_s, 2),
            "prices": {
                p: {
                    "model": t.model,
                    "input": t.input,
                    "cache_read": t.cache_read,
                    "cache_write": t.cache_write,
                    "per_tokens": t.per_tokens,
                    "long_above": t.long_above,
                    "source": t.source,
                }
                for p, t in self.prices.items()
            },
            "notes": list(self.notes),
            "runs": [r.as_dict() for r in self.runs],
            "survival": list(self.survival),
            "task_state": list(self.task_state),
        }


def run_compare(
    paths: Sequence[Path],
    *,
    windows: Sequence[int] = (32_000, 128_000),
    strategies: Sequence[str] | None = None,
    quick: bool = False,
    counter: TokenCounter | None = None,
    memory: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> CompareReport:
    """Replay every session in ``paths`` at every window through every strategy.

    ``strategies``: names for :func:`make_strategy`; None runs :func:`default_strategies`,
    leaving out (with a note) langchain-trim when langchain-core is not installed. ``quick``:
    only the session with the most model calls, at the first window.
    """
    started = time.perf_counter()
    counter = counter or default_counter()
    tables = load_prices()
    notes = [f"openhands-*: not run. {OPENHANDS_UNAVAILABLE}", *FRAMEWORKS_UNRUN]
    names = list(default_strategies() if strategies is None else strategies)
    if strategies is None and not langchain_available():
        names.remove("langchain-trim")
        notes.append("langchain-trim: not run, langchain-core is not installed (comal[bench])")
    if strategies is None and not context_editing_available():
        names.remove("langchain-summarization")
        notes.append("langchain-summarization: not run, langchain is not installed (comal[bench])")
    made = [make_strategy(name, counter) for name in names]
    files = find_transcripts(paths)
    if not files:
        raise UserError("no transcript files found; pass .json, .jsonl or .traj files or folders")
    runs: list[RunResult] = []
    with scratch_ledger(counter) as led:
        progress(f"importing {len(files)} file(s)")
        sessions, skipped = load_sessions(led, files)
        notes += skipped
        if not sessions:
            raise UserError(
                "no transcript could be imported: " + "; ".join(skipped or ["none was found"])
            )
        if quick and sessions:
            sessions = [max(sessions, key=lambda s: len(s.turns))]
            windows = list(windows)[:1]
        for session in sessions:
            pricer = Pricer(counter)
            for window in windows:
                budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
                for strategy in made:
                    progress(f"{session.name} at {window:,}: {strategy.name}")
                    runs.append(
                        run_strategy(strategy, session, budget, pricer, tables, memory=memory)
                    )
            pricer.clear()
        rates: list[dict[str, Any]] = []
        if any(s.name.startswith("comal-dag") for s in made):
            from ._survival import survival

            for window in windows:
                rate = survival(led, sessions, window, counter, progress=progress)
                rates.append(rate.as_dict())
    engines = sorted({s.name.split(":")[0].removeprefix("comal-") for s in made
                      if s.name.startswith("comal-")} & {"limit", "dag", "pipeline"})  # fmt: skip
    checks: list[dict[str, Any]] = []
    if engines:
        from ._task_state import task_checks

        progress("task state: a scripted coordinator under each engine")
        checks = [c.as_dict() for c in task_checks(engines)]
    return CompareReport(
        counter=counter.name,
        windows=tuple(windows),
        strategies=tuple(s.name for s in made),
        runs=tuple(runs),
        prices=tables,
        notes=tuple(notes),
        elapsed_s=time.perf_counter() - started,
        quick=quick,
        transcripts=tuple(s.name for s in sessions),
        survival=tuple(rates),
        task_state=tuple(checks),
    )
