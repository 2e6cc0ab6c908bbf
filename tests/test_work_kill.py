"""The long-work kill loop: a scripted coordinator delegating three work steps, killed with
SIGKILL at random points, resumed with ``comal --resume PARENT -p`` until it finishes.

Each run is the real command line (``comal -p … --model script:PATH``; the steps read
``PATH.children/n.jsonl``) in a worker forked by ``_work_kill_driver.py``. The coordinator keeps
a board of three items with checks, delegates two steps at once and then a third (each writes
three files and appends a line to its log with an Edit), composes one draft from their answers
by reference, marks the items done (their checks verify them) and closes with finish_call. A
worker is killed at a random phase of any agent or house in the process (the coordinator's or a
step's thread) or after a random delay; the next resumes the coordinator, which resumes its
unfinished steps in their own sessions. After every worker: no write twice, at most one draft,
not finished without a passing finish_call. After each run's last resume: every file in its
final state, each step's writes applied once by its receipts and by the workspace, exactly one
draft rebuilt from its references, ``comal verify`` clean.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _fork_server import Zygote
from _work_support import (
    FINAL_ANSWER,
    FINAL_FILES,
    STEP_WRITES,
    STEPS,
    applied_once,
    counts,
    step_answer,
    write_scripts,
)
from comal.agent import answer_of
from comal.cli import app
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.ops import receipts
from comal.tokens import EstimatingCounter
from comal.work import board_of, drafts_of

DRIVER = Path(__file__).with_name("_work_kill_driver.py")
MIN_RUNS = 3
MAX_RUNS = 10
MIN_KILLS = 30
PAUSE_MAX = 45  # a resumed worker is paused within its first PAUSE_MAX phases
# The first run is killed at these phases first, so each recovery path is taken at least once:
# a delegation recorded but its step not started (the WorkStepRun answered again from its
# record), a step's write landed but not receipted (postcondition_observed) and one prepared but
# not landed (not_applied, run again), the steps collected, a draft recorded but its result not
# (rebuilt from its references), finish_call run but not receipted, and receipted but the
# session not yet marked finished.
FORCED = [
    "delegated",
    "written aw1",
    "prepared bw2",
    "recorded wait12",
    "executed draft",
    "executed fin",
    "recorded fin",
]

pytestmark = pytest.mark.slow


def _root_of(led: LedgerBackend, tenant: str) -> Scope | None:
    roots = [s for s in led.sessions(tenant=tenant) if s.parent is None]
    assert len(roots) <= 1, roots
    return roots[0].scope if roots else None


def _invariants(led: LedgerBackend, scope: Scope, root: Path) -> None:
    """What holds after every worker, killed or not."""
    seen = counts(led, scope, root)
    assert seen["drafts"] <= 1, seen
    for step in seen["steps"].values():
        for call, statuses in step["writes"].items():
            # Never two writes of one call: zero or more proven non-writes, then one write.
            landed = [s for s in statuses if s in ("ok", "postcondition_observed")]
            assert len(landed) <= 1, (call, statuses)
    for k in STEPS:
        log = root / k / "log.txt"
        if log.exists():
            assert log.read_text().count(k.upper()) <= 1, log.read_text()
    info = led.session(scope)
    assert info is not None
    if info.status == "finished":
        passed = [
            r for r in receipts(led, scope) if r.operation == "finish_call" and r.status == "ok"
        ]
        assert passed, "finished without a finish_call that passed"


def _final(led: LedgerBackend, scope: Scope, root: Path) -> dict[str, int]:
    """What holds once the run finished; the numbers it counted."""
    info = led.session(scope)
    assert info is not None and info.status == "finished"
    seen = counts(led, scope, root)
    assert seen["files"] == FINAL_FILES  # every file in its final state, nothing else
    assert sorted(seen["steps"]) == [1, 2, 3]
    writes = 0
    for n, k in enumerate(STEPS, 1):
        step = seen["steps"][n]
        assert step["outcome"] == "finished", step
        assert sorted(step["writes"]) == sorted(f"{k}{w}" for w in STEP_WRITES), step
        for call, statuses in step["writes"].items():
            assert applied_once(statuses), (call, statuses)
            writes += 1
        assert (root / k / "log.txt").read_text().count(k.upper()) == 1  # the Edit, once
    assert seen["drafts"] == 1
    draft = seen["draft_text"]
    assert draft is not None and draft.startswith("# Report\n\nThree steps:")
    for k in STEPS:
        assert draft.count(step_answer(k)) == 1  # each fragment once, by reference
    assert len(drafts_of(led, scope)) == 1
    shown = [
        e.message.tool_result.text
        for e in led.entries(scope)
        if e.message.tool_result is not None and e.message.tool_result.call_id == "draft"
    ]
    assert len(shown) == 1 and shown[0].endswith(draft)  # the recovered result, byte for byte
    board = board_of(led, scope)
    assert [i.status for i in board.items] == ["verified"] * 3
    finishes = [r for r in receipts(led, scope) if r.operation == "finish_call"]
    assert finishes and finishes[-1].status == "ok" and finishes[-1].call_id == "fin"
    assert answer_of(led, scope) == FINAL_ANSWER
    return {"writes": writes, "drafts": seen["drafts"], "steps": len(seen["steps"])}


def test_sigkill_anywhere_in_delegated_work_then_resume_finishes_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: WRK-1, WRK-2, WRK-3, WRK-4, WRK-5, RES-1, RES-2, RES-3, RES-5, BRD-3, LED-3
    rng = random.Random(20261202)
    db = tmp_path / "ledger.db"
    script = write_scripts(tmp_path / "scripts")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"checks": ["test -f a/one.txt"], "work": {"parallel": 2}}))
    env = {"COMAL_LEDGER": str(db), "COMAL_CONFIG": str(config)}
    monkeypatch.setenv("COMAL_LEDGER", str(db))
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    led = open_ledger(db, counter=EstimatingCounter())
    zygote = Zygote(DRIVER, tmp_path / "driver.err")
    kills = {"phase": 0, "delay": 0}
    totals = {"runs": 0, "workers": 0, "writes": 0, "drafts": 0, "steps": 0}
    forced = list(FORCED)
    try:
        run = 0
        while run < MIN_RUNS or sum(kills.values()) < MIN_KILLS:
            assert run < MAX_RUNS, f"too few kills land: {kills}"
            tenant = f"run{run}"
            root = tmp_path / f"ws{run}"
            root.mkdir()
            for attempt in range(200):
                assert attempt < 199, "the run never finished"
                scope = _root_of(led, tenant)
                flags = ["--model", f"script:{script}", "--mode", "trusted"]
                flags += ["--workspace", str(root), "--json"]
                if scope is None:
                    argv = ["-p", "Coordinate the three steps.", *flags]
                else:
                    argv = ["--resume", scope.session, "-p", *flags]
                cmd: dict[str, Any] = {"argv": argv, "env": env | {"COMAL_TENANT": tenant}}
                kind = rng.choice(["phase", "phase", "phase", "delay"])
                if forced:
                    kind = "phase"
                    cmd["pause_on"] = forced[0]
                elif kind == "phase":
                    cmd["pause_at"] = rng.randint(1, PAUSE_MAX)
                pid = zygote.spawn(cmd)
                totals["workers"] += 1
                if kind == "phase":
                    event, code = zygote.until(pid, "paused")
                    # The two steps run side by side: a phase of one may have passed before the
                    # previous kill, so a forced phase is spent only where it paused, else it is
                    # forced again in the next run (every one must land: `not forced` below).
                    if "pause_on" in cmd and event == "paused":
                        forced.pop(0)
                else:
                    event, code = zygote.until(pid, "started")
                    time.sleep(rng.uniform(0.0, 0.6))
                if event != "exit":
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    _, code = zygote.until(pid)
                scope = _root_of(led, tenant)
                if scope is not None:
                    _invariants(led, scope, root)
                if code == f"-{signal.SIGKILL}":
                    kills[kind] += 1
                    continue
                assert code == "0", code
                assert scope is not None
                if led.session(scope).status == "finished":  # type: ignore[union-attr]
                    break
            assert scope is not None
            done = _final(led, scope, root)
            totals["runs"] += 1
            for key in ("writes", "drafts", "steps"):
                totals[key] += done[key]
            run += 1
    finally:
        zygote.close()
    assert sum(kills.values()) >= MIN_KILLS, kills
    assert kills["phase"] and kills["delay"] and not forced, (kills, forced)
    # Every step's lock left by a killed worker was cleared and recorded (RES-2).
    events = [e for s in led.sessions() for e in led.records(s.scope, "event")]
    assert any(e.kind == "lock_cleared" for e in events)
    # The kills landed inside the steps: some resumed in their own sessions (a second start),
    # and their writes were recovered both ways (RES-3): landed but not receipted, not landed.
    starts: dict[str, int] = {}
    for e in events:
        if e.kind == "work_started":
            starts[e.body["child"]] = starts.get(e.body["child"], 0) + 1
    assert max(starts.values()) > 1, starts
    statuses = {r.status for s in led.sessions() for r in receipts(led, s.scope)}
    assert {"postcondition_observed", "not_applied"} <= statuses, statuses
    verified = CliRunner().invoke(app, ["verify", "--json"])
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.stdout)["ok"] is True
    led.close()
    # 3 steps × 4 writes per run, one draft per run.
    assert totals["writes"] == 12 * totals["runs"] and totals["drafts"] == totals["runs"]
    print("kills:", kills, "totals:", totals)
