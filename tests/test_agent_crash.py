"""The agent killed with SIGKILL at random points of a scripted task, then resumed (RES-1..5).

Each task is the scripted multi-step job of ``_agent_support.TASK`` (Write, Edit, Bash, an
OUTPUT_LENGTH response proposing a write, an answer, a finish check) in its own session and
workspace. Workers forked by ``_agent_crash_driver.py`` run it and are killed — exactly at a
chosen phase of the loop or the house, or after a random delay, some through ``run_prompt``
itself — and the next worker resumes, until one finishes. Then every file must be in its intended
final state, every Edit (which appends a line) applied exactly once, the incomplete response's
write never executed, and the ledger whole.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from _agent_support import TASK, TASK_ANSWER, TASK_CHECKS, TASK_FILES, write_script
from _fork_server import Zygote
from comal.agent import INCOMPLETE_EVENT, answer_of
from comal.ledger import Scope, open_ledger, verify
from comal.ops import receipts
from comal.tokens import EstimatingCounter

DRIVER = Path(__file__).with_name("_agent_crash_driver.py")
TASKS = 8
MIN_KILLS = 36
WRITES = {"w1", "e1", "w2", "e2"}
# The first task is killed at these phases first, so each recovery path is taken at least once:
# a write prepared but not landed (not_applied, run again), one landed but not receipted
# (postcondition_observed), a shell call started (uncertain, blocked), a call judged but never
# started (pending), a response received but not appended (served again from the script).
FORCED = [
    "intended task-0",
    "prepared w1",
    "prepared b1",
    "written e1",
    "proposed 6",
    "judged w2",
    "executed e2",
    "appended 11",
]


def final_state(root: Path) -> dict[str, str]:
    # Temporary files of a write killed before its rename are left behind; they are not state.
    return {
        p.name: p.read_text()
        for p in root.iterdir()
        if p.is_file() and not (p.name.startswith(".") and p.name.endswith(".tmp"))
    }


def test_sigkill_at_random_points_then_resume_finishes_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: RES-1, RES-2, RES-3, RES-4, RES-5, OUT-2, OPS-3
    rng = random.Random(20261129)
    db = tmp_path / "ledger.db"
    script = write_script(tmp_path / "task.jsonl", TASK)
    config = tmp_path / "home" / "comal" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"checks": list(TASK_CHECKS)}))
    # For the workers that go through run_prompt; monkeypatched, so no later test inherits it.
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    led = open_ledger(db, counter=EstimatingCounter())
    zygote = Zygote(DRIVER, tmp_path / "driver.err")
    kills = {"phase": 0, "delay": 0, "cli": 0}
    probe_kills = 0
    sessions: list[tuple[Scope, Path]] = []
    try:
        task = -1
        while task + 1 < TASKS or sum(kills.values()) < MIN_KILLS:
            task += 1
            assert task < 4 * TASKS, f"too few kills land: {kills}"
            # As `comal -p` creates it, its model recorded: the workers that resume through
            # run_prompt read their script position from it (served_by), the others from the
            # request count, and both must agree.
            meta = {"model": f"script:{script}"}
            scope = led.create_session("t", "a", session_id=f"task-{task}", meta=meta)
            root = tmp_path / f"ws{task}"
            root.mkdir()
            sessions.append((scope, root))
            base = {"db": str(db), "session": scope.session, "root": str(root)}
            base |= {"script": str(script), "prompt": "Do the task."}
            forced = list(FORCED) if task == 0 else []
            for attempt in range(80):
                assert attempt < 79, "the task never finished"
                kind = rng.choice(["phase", "phase", "phase", "delay", "cli"])
                if kind == "cli" and not led.heads(scope):
                    kind = "delay"  # run_prompt resumes: the prompt must be there first
                if forced or kind == "phase":
                    kind = "phase"
                    where = (
                        {"pause_on": forced.pop(0)} if forced else {"pause_at": rng.randint(1, 12)}
                    )
                    pid = zygote.spawn(base | where)
                    event, detail = zygote.until(pid, "paused")
                    if event == "exit":
                        assert detail == "0" and not where.get("pause_on"), (where, detail)
                        break
                    os.kill(pid, signal.SIGKILL)
                    assert zygote.until(pid)[1] == f"-{signal.SIGKILL}"
                    kills["phase"] += 1
                    probe_kills += 1
                    continue
                pid = zygote.spawn(base | {"cli": kind == "cli"})
                event, code = zygote.until(pid, "phase")  # it started (or already ended)
                if event != "exit":
                    time.sleep(rng.uniform(0.0, 0.05 if kind == "delay" else 0.4))
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    _, code = zygote.until(pid)
                if code == "0":
                    if led.session(scope).status == "finished":  # type: ignore[union-attr]
                        break
                    continue
                assert code == f"-{signal.SIGKILL}"
                kills[kind] += 1
    finally:
        zygote.close()
    assert sum(kills.values()) >= MIN_KILLS, kills
    for scope, root in sessions:
        info = led.session(scope)
        assert info is not None and info.status == "finished"
        assert final_state(root) == TASK_FILES  # Edits appended each line exactly once
        assert not (root / "poison.txt").exists()  # the incomplete response's call never ran
        done = receipts(led, scope)
        assert "p1" not in {r.call_id for r in done}
        for call_id in WRITES:
            statuses = [r.status for r in done if r.call_id == call_id]
            # Zero or more proven non-writes, then exactly one write.
            assert statuses[-1] in ("ok", "postcondition_observed"), (call_id, statuses)
            assert set(statuses[:-1]) <= {"not_applied"}, (call_id, statuses)
        events = led.records(scope, "event")
        assert [e.kind for e in events].count(INCOMPLETE_EVENT) == 1
        assert answer_of(led, scope) == TASK_ANSWER
    cleared = sum(e.kind == "lock_cleared" for s, _ in sessions for e in led.records(s, "event"))
    assert cleared >= probe_kills  # every probe kill happened inside the lock (RES-2)
    first = {r.call_id: r.status for r in receipts(led, sessions[0][0])}
    seen = {r.status for r in receipts(led, sessions[0][0])}
    assert {"not_applied", "postcondition_observed", "uncertain"} <= seen, seen
    assert first["b1"] == "uncertain"  # blocked, never run again: its receipt is the last word
    report = verify(led)
    assert report.ok, report.faults
    led.close()
    print("kills:", kills)
