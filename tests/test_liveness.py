"""Sessions say whether they are alive, the same on every surface (issue 32, item 8).

# covers: DRV-8, RES-1
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _agent_support import reply, rig, text, tool, write_script
from comal.agent import Config, Flags, Runtime, liveness, lock_session
from comal.ledger import open_ledger
from comal.serve._views import sessions_view
from comal.serve._web_views import fingerprint
from comal.testing import ScriptedProvider


def _comal(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "comal", *args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def _listed(env: dict[str, str]) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "comal", "sessions", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return {row["session"]: row["status"] for row in json.loads(done.stdout)}


def test_a_killed_run_is_crashed_not_active(tmp_path: Path) -> None:
    # covers: DRV-8, RES-1
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(
        tmp_path / "s.jsonl",
        [reply(tool("b1", "Bash", command="sleep 30")), reply(text("slept"))],
    )
    db = tmp_path / "l.db"
    env = {**os.environ, "COMAL_LEDGER": str(db), "HOME": str(tmp_path)}
    run = _comal(env, "-p", "sleep a while", "--model", f"script:{script}",
                 "--mode", "trusted", "--workspace", str(ws))  # fmt: skip
    led = open_ledger(db) if db.exists() else None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the Bash call is under way
        if led is None and db.exists():
            led = open_ledger(db)
        if led is not None and led.sessions() and led.sessions()[0].entries >= 2:
            break
        time.sleep(0.2)
    assert led is not None
    (info,) = led.sessions()
    assert liveness(led, info) == "active"  # the run holds the lock
    assert _listed(env)[info.id] == "active"
    run.send_signal(signal.SIGKILL)
    run.wait(30)
    assert _listed(env)[info.id] == "crashed"
    led.close()


def test_interrupted_idle_and_finished_are_told_apart(tmp_path: Path) -> None:
    # covers: DRV-8
    r = rig(tmp_path)
    # A run stopped by max_turns mid-task: it ended on purpose, its task is mid-way.
    steps = [reply(tool(f"b{i}", "Bash", command="true")) for i in range(3)]
    rt = Runtime.open(
        r.ledger,
        Flags(model="anthropic:claude-sonnet-4-6", workspace=r.root, mode="trusted",
              max_turns=2),
        config=Config(),
        provider=ScriptedProvider(steps),
    )  # fmt: skip
    assert rt.run("go").status == "max_turns"
    info = r.ledger.session(rt.need_scope())
    assert info is not None and liveness(r.ledger, info) == "interrupted"
    # An answered session whose checks did not close it waits for a person: idle.
    rt2 = Runtime.open(
        r.ledger,
        Flags(model="anthropic:claude-sonnet-4-6", workspace=r.root, mode="trusted"),
        config=Config(checks=["false"]),
        provider=ScriptedProvider([reply(text("done")), reply(text("still done"))]),
    )
    rt2.run("answer")
    info2 = r.ledger.session(rt2.need_scope())
    assert info2 is not None
    assert liveness(r.ledger, info2) in ("idle", "interrupted")
    # Finished, and a lock held makes it active whatever else is true.
    r.ledger.set_status(info2.scope, "finished")
    info2 = r.ledger.session(info2.scope)
    assert info2 is not None and liveness(r.ledger, info2) == "finished"
    lock = lock_session(r.ledger, info.scope)
    try:
        assert liveness(r.ledger, info) == "active"
        # The page's sidebar and its header say the same.
        row = next(s for s in sessions_view(r.ledger, info.tenant) if s["id"] == info.id)
        assert row["status"] == fingerprint(r.ledger, info.scope)["status"] == "active"
    finally:
        lock.release()
    assert liveness(r.ledger, info) == "interrupted"
