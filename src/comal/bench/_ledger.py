"""``comal bench ledger``: append, batched import and tail-read speed of the SQLite ledger."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from ..ledger import Scope, SQLiteLedger, StepInput, Synchronous, open_ledger
from ..messages import Message, ToolCall
from ..tokens import EstimatingCounter, TokenCounter
from ._ledger_scale import raw_sqlite_peer

_WORDS = (
    "def return self value import the file line error test parse config request token budget "
    "session ledger entry digest window result tool call assistant user output module path"
).split()


@dataclass(frozen=True)
class LedgerBench:
    entries: int
    steps: int
    counter: str
    append_steps_per_s: float
    append_entries_per_s: float
    append_full_steps_per_s: float
    batched_rows_per_s: float
    batched_rows_per_s_storage_only: float
    tail_entries: int
    tail_tokens: int
    tail_p50_ms: float
    tail_p99_ms: float
    tail_cold_p50_ms: float
    tail_cold_p99_ms: float
    counting_mb_per_s: float
    raw_one_row_commits_per_s: float  # sqlite3 alone, same run: see _ledger_scale.RawPeer
    raw_steps_per_s: float

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def _time_reads(read: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        read()
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out)


def _p99(sorted_ms: list[float]) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * 0.99))]


class _LengthCounter:
    name = "length/4"

    def count(self, text: str) -> int:
        return len(text) // 4


def _blob(rng: random.Random, size: int) -> str:
    words = []
    n = 0
    while n < size:
        w = rng.choice(_WORDS)
        words.append(w)
        n += len(w) + 1
    text = " ".join(words)[:size]
    # Line structure like real tool output, so previews and line counts are realistic.
    return "\n".join(text[i : i + 96] for i in range(0, len(text), 96))


def synthetic_steps(seed: int, entries: int) -> Iterator[list[Message]]:
    """Steps of one assistant message (200 B – 1 KB) and 1–3 tool results (200 B – 20 KB).

    Result sizes are log-uniform, as in real transcripts: most outputs are a few hundred bytes
    to a few KB (median ~2 KB), a few are large (mean ~4.3 KB).
    """
    rng = random.Random(seed)
    pool = [_blob(rng, int(200 * 100 ** rng.random())) for _ in range(256)]
    made = 0
    i = 0
    while made < entries:
        k = min(rng.randint(1, 3), max(1, entries - made - 1))
        calls = [ToolCall(f"b{i}-{j}", "Bash", f'{{"command": "step {i} {j}"}}') for j in range(k)]
        msgs = [Message.assistant(_blob(rng, rng.randint(200, 1000)), *calls)]
        msgs += [Message.tool(c.id, rng.choice(pool)) for c in calls]
        made += len(msgs)
        i += 1
        yield msgs


def _timed_appends(
    path: Path, sync: Synchronous, counter: TokenCounter, steps: list[list[Message]]
) -> tuple[float, SQLiteLedger, Scope]:
    led = open_ledger(path, counter=counter, synchronous=sync)
    scope = led.create_session("bench", "ledger")
    t0 = time.perf_counter()
    for msgs in steps:
        led.append(scope, msgs)
    return time.perf_counter() - t0, led, scope


def _timed_import(path: Path, counter: TokenCounter, steps: list[list[Message]]) -> float:
    """Seconds to import ``steps`` into a new ledger at ``path``, 2,000 steps a batch."""
    led = open_ledger(path, counter=counter)
    scope = led.create_session("bench", "import")
    t0 = time.perf_counter()
    for i in range(0, len(steps), 2000):
        led.append_steps(scope, [StepInput(s) for s in steps[i : i + 2000]])
    elapsed = time.perf_counter() - t0
    led.close()
    return elapsed


def _timed_tails(
    led: SQLiteLedger, scope: Scope, tokens: int, reads: int
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``reads`` tail reads, warm then cold (a fresh process has decoded
    nothing yet: every body is read and decoded)."""
    warm = _time_reads(lambda: led.tail(scope, tokens=tokens), reads)

    def cold_read() -> object:
        led._cache.clear()
        return led.tail(scope, tokens=tokens)

    return warm, _time_reads(cold_read, reads)


def run_ledger_bench(
    *,
    entries: int = 100_000,
    window_tokens: int = 128_000,
    reads: int = 200,
    counter: TokenCounter | None = None,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> LedgerBench:
    counter = counter or EstimatingCounter()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        progress("generating steps")
        steps = list(synthetic_steps(7, entries))
        n_entries = sum(len(s) for s in steps)

        progress("counting tokens")
        sample = [m.text for s in steps[:2000] for m in s]
        t0 = time.perf_counter()
        for text in sample:
            counter.count(text)
        counting = sum(len(t) for t in sample) / 1e6 / (time.perf_counter() - t0)

        progress(f"appending {len(steps):,} steps (synchronous=NORMAL)")
        elapsed, led, scope = _timed_appends(root / "normal.db", "NORMAL", counter, steps)

        progress("appending with synchronous=FULL")
        full_steps = steps[: max(1, len(steps) // 10)]
        full_elapsed, full_led, _ = _timed_appends(root / "full.db", "FULL", counter, full_steps)
        full_led.close()

        progress("batched import")
        batch_elapsed = _timed_import(root / "batch.db", counter, steps)
        # The same import with a counter that costs nothing isolates storage (codec, digests,
        # SQLite) from counting.
        progress("batched import, storage only")
        bare_elapsed = _timed_import(root / "bare.db", _LengthCounter(), steps)

        progress("raw sqlite3 on the same steps")
        raw = raw_sqlite_peer(steps, root)

        progress(f"reading the {window_tokens:,}-token tail {reads} times")
        tail = led.tail(scope, tokens=window_tokens)
        times, cold = _timed_tails(led, scope, window_tokens, reads)
        led.close()
    return LedgerBench(
        entries=n_entries,
        steps=len(steps),
        counter=counter.name,
        append_steps_per_s=len(steps) / elapsed,
        append_entries_per_s=n_entries / elapsed,
        append_full_steps_per_s=len(full_steps) / full_elapsed,
        batched_rows_per_s=n_entries / batch_elapsed,
        batched_rows_per_s_storage_only=n_entries / bare_elapsed,
        tail_entries=len(tail),
        tail_tokens=sum(e.tokens for e in tail),
        tail_p50_ms=statistics.median(times),
        tail_p99_ms=_p99(times),
        tail_cold_p50_ms=statistics.median(cold),
        tail_cold_p99_ms=_p99(cold),
        counting_mb_per_s=counting,
        raw_one_row_commits_per_s=raw.one_row_commits_per_s,
        raw_steps_per_s=raw.steps_per_s,
    )
