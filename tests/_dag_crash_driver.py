"""Child process for the dag engine's crash and race tests: forks compaction workers.

It imports comal once, prints ``ready`` and reads one JSON command per line: ``{"db", "tenant",
"agent", "session", "window", "jitter_ms"}``. For each it forks a worker and prints ``spawned
PID``; when a worker ends it prints ``exit PID CODE`` (``-SIGNAL`` when killed). A worker runs
sweeps of the session until nothing is due (the "next run" that finishes pending work), each
sweep waiting its turn on the session's lease; every phase of a sweep is reported as ``PID phase
PHASE DETAIL`` and followed by a random pause of up to ``jitter_ms``, so kills land anywhere.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from _fork_server import say, serve
from comal.context import ExtractiveSummarizer, View, get_engine
from comal.context.dag import Blocked, DagConfig
from comal.ledger import Scope, open_ledger
from comal.tokens import Budget, EstimatingCounter
from comal.turns import sweep


def config(counter: EstimatingCounter) -> DagConfig:
    return DagConfig(counter=counter, defer_compaction=False, lease_ttl_s=1.0)


def budget(window: int) -> Budget:
    return Budget.for_window(window, system_tokens=100, tools_tokens=100)


def work(cmd: dict[str, Any]) -> None:
    me = os.getpid()
    rnd = random.Random(me)
    jitter = float(cmd.get("jitter_ms", 0)) / 1000

    def probe(phase: str, detail: str) -> None:
        say(f"{me} phase {phase} {detail}")
        if jitter:
            time.sleep(rnd.random() * jitter)

    counter = EstimatingCounter()
    led = open_ledger(cmd["db"], counter=counter)
    scope = Scope(cmd["tenant"], cmd["agent"], cmd["session"])
    engine = get_engine("dag")
    cfg = config(counter)
    made = conflicts = 0
    while True:
        report = sweep(
            led, scope, engine, cfg, budget(cmd["window"]), ExtractiveSummarizer(counter),
            probe=probe,
        )  # fmt: skip
        made += len(report.made)
        conflicts += report.conflicts
        if report.stopped.startswith("lease held"):
            time.sleep(0.05)
            continue
        view = View.from_ledger(led, scope, bases=engine.bases)
        jobs = engine.plan(view, budget(cmd["window"]), cfg)
        if not any(not isinstance(j, Blocked) for j in jobs):
            break
    say(f"{me} done {made} {conflicts}")
    led.close()


def main() -> None:
    serve(work)


if __name__ == "__main__":
    main()
