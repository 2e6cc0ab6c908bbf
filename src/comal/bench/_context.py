"""``comal bench context``: per-turn assembly time of an engine, from the ledger.

A session is grown step by step with the engine running as an agent would (assembling and
storing the checkpoints it proposes), then ``measure`` more turns are timed end to end as a
live turn pays them: the turn service's ``prepare`` (maintenance where the engine places it,
the view read from the ledger, the assembly of a window's worth of active memory, the
commit); the view and assembly columns are its two middle phases.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..context import get_engine
from ..ledger import open_ledger
from ..tokens import EstimatingCounter
from ..turns import ContextSession
from ._ledger import synthetic_steps


@dataclass(frozen=True)
class ContextBench:
    entries: int
    session_tokens: int
    window: int
    checkpoints: int
    turns: int
    p50_ms: float
    p99_ms: float
    last_ms: float
    view_p50_ms: float
    assemble_p50_ms: float
    input_tokens_last: int
    summaries: int = 0  # the dag engine's, when it is the engine timed

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def run_context_bench(
    *,
    entries: int = 2_000,
    window: int = 128_000,
    measure: int = 100,
    every: int = 8,
    workdir: Path | None = None,
    engine: str = "limit",
    progress: Callable[[str], None] = lambda _: None,
) -> ContextBench:
    counter = EstimatingCounter()
    chosen = get_engine(engine)
    steps = list(synthetic_steps(11, entries + measure * 4))
    marks: dict[str, float] = {}

    def mark(phase: str, _detail: str) -> None:
        marks[phase] = time.perf_counter()

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        led = open_ledger(Path(tmp) / "ctx.db", counter=counter)
        scope = led.create_session("bench", "context")
        # The turn service, as an agent runs it (its configuration gets the ledger's counter).
        service = ContextSession(led, scope, chosen, probe=mark)
        budget = service.budget(window, system_tokens=0, tools_tokens=0)
        made = 0
        i = 0
        progress(f"growing a {entries:,}-entry session with the engine running")
        while made < entries:
            made += len(led.append(scope, steps[i]))
            i += 1
            if i % every == 0:
                # Growing with the engine in the loop leaves the stand-ins an agent would have.
                service.prepare(budget)
                service.drain()
        progress(f"timing {measure} turns")
        total, view_ms, asm_ms = [], [], []
        last_input = 0
        for _ in range(measure):
            led.append(scope, steps[i])
            i += 1
            # What a live turn pays: the whole prepare (maintenance as the engine places it,
            # view, assembly, commit); a sweep the engine defers runs after it, untimed, as it
            # runs beside the model call and the tools in a live turn.
            t0 = time.perf_counter()
            turn = service.prepare(budget)
            t3 = time.perf_counter()
            service.drain()
            total.append((t3 - t0) * 1000)
            view_ms.append((marks["turn_viewed"] - t0) * 1000)
            asm_ms.append((marks["turn_assembled"] - marks["turn_viewed"]) * 1000)
            last_input = turn.budget.fixed + turn.assembly.history_tokens
        info = led.session(scope)
        checkpoints = len(led.checkpoints(scope))
        summaries = len(led.summaries(scope))
        led.close()
    ordered = sorted(total)
    return ContextBench(
        entries=info.entries if info else 0,
        session_tokens=info.tokens if info else 0,
        window=window,
        checkpoints=checkpoints,
        turns=measure,
        p50_ms=statistics.median(ordered),
        p99_ms=ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        last_ms=total[-1],
        view_p50_ms=statistics.median(view_ms),
        assemble_p50_ms=statistics.median(asm_ms),
        input_tokens_last=last_input,
        summaries=summaries,
    )
