"""``comal bench turn``: the agent's per-turn overhead (everything but the model call), flat?

A tenant's ledger holds ``imported`` requests in another session (an imported history), and one
session is grown to each of ``at`` turns (steps appended with their request records, as the
agent leaves them). At each size, ``measure`` real turns of the agent loop run against a model
that answers instantly with one cheap tool call, so the time of a turn is comal's own: read the
view, assemble, price the budget, check the spend caps, record the request, judge and run the
tool, record its result and receipt. The ratio of the medians at the largest and smallest size
says whether per-turn cost grows with the session or with the tenant's history (1.0: flat).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..ledger import LedgerBackend, Scope, UsageInput, open_ledger
from ..messages import Message, ToolCall
from ..providers import ModelRequest, ModelResponse
from ..tokens import EstimatingCounter, Usage
from ._ledger import synthetic_steps

__all__ = ["TurnBench", "run_turn_bench"]


@dataclass(frozen=True)
class TurnBench:
    turn: int  # the session's size when measured, in turns
    entries: int
    imported_requests: int
    measured: int
    p50_ms: float
    p90_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


class _Instant:
    """A provider that answers at once with one read-only tool call, then nothing more."""

    name = "instant"

    def __init__(self) -> None:
        self.calls = 0

    def request(self, req: ModelRequest) -> ModelResponse:
        self.calls += 1
        call = ToolCall(f"b{self.calls}", "Glob", '{"pattern": "*.txt"}')
        message = Message.assistant(f"turn {self.calls}", call)
        usage = Usage(new_input=1_000, cache_read=None, cache_write=None, output=20, reasoning=None)
        return ModelResponse(message, "tool_use", usage, model=req.model, provider="anthropic")


def _grow(led: LedgerBackend, scope: Scope, turns: int, run: str) -> None:
    """``turns`` steps with the request records an agent run leaves."""
    steps = synthetic_steps(7, turns * 3)
    at = datetime.now(UTC).isoformat(timespec="microseconds")
    for n, step in zip(range(turns), steps, strict=False):
        usage = UsageInput(
            Usage(1_000, None, None, 20, None),
            model="instant",
            protocol="anthropic",
            meta={"v": 1, "run": run, "at": at, "prompt_last_seq": n},
        )
        led.append(scope, step, usage=usage)


def _imported(led: LedgerBackend, tenant: str, requests: int) -> None:
    scope = led.create_session(tenant, "imported", title="imported history")
    led.append(scope, [Message.user("imported")])
    with led.atomic():
        for _ in range(requests):
            led.record_request(scope, None, UsageInput(Usage(500, 0, 0, 10, None), model="x"))


def run_turn_bench(
    *,
    at: Sequence[int] = (100, 5_000),
    imported: int = 40_000,
    measure: int = 30,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[TurnBench]:
    from ..agent import Config, Flags, Runtime

    results = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        (root / "ws" / "a.txt").write_text("a\n")
        led = open_ledger(root / "turn.db", counter=EstimatingCounter())
        progress(f"recording {imported:,} imported requests")
        _imported(led, "bench", imported)
        for size in sorted(at):
            progress(f"growing a session to {size:,} turns")
            provider = _Instant()
            ws = root / "ws"
            flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=ws, mode="trusted")
            config = Config(tenant="bench", agent="turn", max_turns=measure)
            rt = Runtime.open(led, flags, config=config, provider=provider)
            rt.start("begin")
            scope = rt.need_scope()
            _grow(led, scope, size, run="earlier")
            led.append(scope, [Message.user("go on")])
            progress(f"timing {measure} turns at {size:,}")
            times: list[float] = []
            agent = rt.agent(say=_timer(times))
            agent.run(None)
            info = led.session(scope)
            ordered = sorted(times[1:] or times)  # the first turn warms the caches
            results.append(
                TurnBench(
                    turn=size,
                    entries=info.entries if info else 0,
                    imported_requests=imported,
                    measured=len(ordered),
                    p50_ms=round(statistics.median(ordered), 3),
                    p90_ms=round(ordered[int(len(ordered) * 0.9)], 3),
                    max_ms=round(ordered[-1], 3),
                )
            )
        led.close()
    return results


def _timer(times: list[float]) -> Callable[[str, str], None]:
    """A ``say`` that times from one ``turn`` note to the next: one whole loop iteration."""
    last: dict[str, Any] = {"t": None}

    def say(kind: str, text: str) -> None:
        if kind != "turn":
            return
        now = time.perf_counter()
        if last["t"] is not None:
            times.append((now - last["t"]) * 1000)
        last["t"] = now

    return say
