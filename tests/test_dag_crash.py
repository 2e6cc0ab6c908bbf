"""Compaction killed with SIGKILL at random points, and four processes racing (DAG-8, LED-1).

Workers are forked by ``_dag_crash_driver.py`` and run sweeps of one session under its lease
until nothing is due. The crash test kills 30+ of them at random phases of their passes (and at
random moments after, so some kills land inside a transaction); after every kill ``verify`` is
clean and no summary is half-written (each has its full-text row, leaves are adjacent); a last
worker finishes the pending work. The race test starts four workers on one session at once:
they make exactly the summaries one worker alone makes, one per chunk.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from _fork_server import Zygote
from comal.context import ExtractiveSummarizer, View, get_engine
from comal.context.dag import Blocked, DagConfig
from comal.ledger import Scope, StepInput, open_ledger, verify
from comal.messages import Message, ToolCall
from comal.tokens import Budget, EstimatingCounter
from comal.turns import sweep

DRIVER = Path(__file__).with_name("_dag_crash_driver.py")
WINDOW = 16_000
MIN_KILLS = 32


def _session(path: Path, steps: int) -> Scope:
    led = open_ledger(path, counter=EstimatingCounter())
    scope = led.create_session("tenant", "agent")
    led.append(scope, [Message.user("run every case and fix what fails")])

    def step(n: int) -> StepInput:
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": f"pytest -k case{n}"}))
        out = "\n".join(f"case {n} row {i} {'z' * 30}" for i in range(30)) + f"\nExit code: {n % 3}"
        return StepInput([Message.assistant(f"case {n}", call), Message.tool(call.id, out)])

    led.append_steps(scope, [step(n) for n in range(steps)])
    led.close()
    return scope


def _cmd(db: Path, scope: Scope, jitter_ms: float = 3) -> dict[str, Any]:
    return {
        "db": str(db), "tenant": scope.tenant, "agent": scope.agent, "session": scope.session,
        "window": WINDOW, "jitter_ms": jitter_ms,
    }  # fmt: skip


def _whole(db: Path, scope: Scope) -> None:
    """verify() clean, and no summary without its edges or full-text row."""
    led = open_ledger(db, counter=EstimatingCounter())
    report = verify(led)
    assert report.ok, report.faults[:3]
    every = led.summaries(scope)
    raw = sqlite3.connect(db)
    indexed = raw.execute("SELECT count(*) FROM summaries_text_fts").fetchone()[0]
    edges = raw.execute("SELECT count(*) FROM summary_children").fetchone()[0]
    raw.close()
    assert indexed == len(every)
    assert edges == sum(len(s.children) for s in every)
    led.close()


def _pending(db: Path, scope: Scope) -> bool:
    led = open_ledger(db, counter=EstimatingCounter())
    engine = get_engine("dag")
    cfg = DagConfig(counter=led.counter)
    budget = Budget.for_window(WINDOW, system_tokens=100, tools_tokens=100)
    jobs = engine.plan(View.from_ledger(led, scope, bases=engine.bases), budget, cfg)
    led.close()
    return any(not isinstance(j, Blocked) for j in jobs)


@pytest.mark.slow
def test_sigkill_at_random_points_of_compaction_then_the_next_run_finishes(tmp_path: Path) -> None:
    # covers: DAG-8, LED-1, LED-6
    db = tmp_path / "crash.db"
    scope = _session(db, 2_500)
    rnd = random.Random(20261201)
    zygote = Zygote(DRIVER, tmp_path / "driver.err")
    kills = 0
    try:
        while kills < MIN_KILLS:
            assert _pending(db, scope), f"work ran out after {kills} kills"
            pid = zygote.spawn(_cmd(db, scope))
            for _ in range(rnd.randint(1, 9)):  # a random phase of a random pass
                event, _ = zygote.until(pid, "phase", "done")
                if event != "phase":
                    break
            else:
                time.sleep(rnd.random() * 0.004)
                os.kill(pid, signal.SIGKILL)
                assert zygote.until(pid)[1] == f"-{signal.SIGKILL}"
                kills += 1
                _whole(db, scope)
                continue
            zygote.until(pid)
        pid = zygote.spawn(_cmd(db, scope, jitter_ms=0))  # the next run, left alone
        event, detail = zygote.until(pid, "done", timeout=300)
        assert event == "done", detail
        assert zygote.until(pid)[1] == "0"
    finally:
        zygote.close()
    _whole(db, scope)
    assert not _pending(db, scope)
    led = open_ledger(db, counter=EstimatingCounter())
    assert led.summaries(scope) and led.lease(scope) is None
    led.close()


def test_four_processes_racing_make_one_summary_per_chunk(tmp_path: Path) -> None:
    # covers: DAG-8
    db = tmp_path / "race.db"
    scope = _session(db, 900)
    alone = tmp_path / "alone.db"
    shutil.copy(db, alone)
    counter = EstimatingCounter()
    led = open_ledger(alone, counter=counter)
    engine = get_engine("dag")
    budget = Budget.for_window(WINDOW, system_tokens=100, tools_tokens=100)
    cfg = DagConfig(counter=counter, defer_compaction=False)
    while True:
        sweep(led, scope, engine, cfg, budget, ExtractiveSummarizer(counter))
        if not _pending(alone, scope):
            break
    expected = sorted((s.depth, s.first_seq, s.last_seq) for s in led.summaries(scope))
    led.close()
    zygote = Zygote(DRIVER, tmp_path / "race.err")
    try:
        pids = {zygote.spawn(_cmd(db, scope, jitter_ms=2)) for _ in range(4)}
        done: dict[int, str] = {}
        exits: dict[int, str] = {}
        deadline = time.monotonic() + 300
        while len(exits) < len(pids):  # the four speak at once: read every line, keep each
            parts = zygote.next(max(0.01, deadline - time.monotonic())).split(" ", 2)
            if parts[0] == "exit":
                exits[int(parts[1])] = parts[2]
            elif parts[0].isdigit() and parts[1] == "done":
                done[int(parts[0])] = parts[2]
            assert len(parts) < 2 or parts[1] != "failed", parts
        assert set(done) == pids and set(exits.values()) == {"0"}
    finally:
        zygote.close()
    led = open_ledger(db, counter=counter)
    got = sorted((s.depth, s.first_seq, s.last_seq) for s in led.summaries(scope))
    assert got == expected  # exactly one summary per chunk, the same chunks as one worker
    assert len(set(got)) == len(got)
    assert sum(int(d.split()[0]) for d in done.values()) == len(got)
    assert verify(led).ok
    led.close()
