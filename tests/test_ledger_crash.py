"""Fault test: SIGKILL a writer at random points; the ledger must hold only whole steps."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from comal.ledger import open_ledger, verify
from comal.messages import group_messages

KILLS = 50


def test_sigkill_never_leaves_a_partial_step(tmp_path: Path) -> None:
    # covers: LED-1, LIM-4
    path = tmp_path / "crash.db"
    with open_ledger(path) as led:
        scope = led.create_session("t", "a")
    writer = Path(__file__).with_name("_crash_writer.py")
    rng = random.Random(1234)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent / "src"))
    for kill in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, str(writer), str(path), "t", "a", scope.session, str(kill)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        assert proc.stdout.readline().strip() == b"wrote"
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    with open_ledger(path) as led:
        report = verify(led)
        assert report.ok, report.faults[:5]
        assert report.paused == ()
        entries = led.entries(scope)
        info = led.session(scope)
        assert info is not None and info.entries == len(entries)
    groups = group_messages([e.message for e in entries])
    assert len(groups) >= KILLS  # every writer committed a step before it was killed
    for g in groups:
        assert g.is_step and not g.open_calls
