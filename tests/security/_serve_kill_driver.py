"""Child process for the ``comal serve`` kill loop: forks real ``comal serve`` runs the test kills.

It imports comal, the server and its dependencies once, prints ``ready`` and reads one JSON
command per line on stdin: ``{"argv", "pause_at"}``. For each it forks a worker that runs
``comal.cli.main(argv)`` (``comal serve …``) and prints ``spawned PID``; when a worker ends it
prints ``exit PID CODE`` (``-SIGNAL`` for a killed one). A fresh interpreter takes seconds to
import the server; a fork takes milliseconds, so dozens of kills fit in a bounded test.

The probe: every reply the worker records is counted, and at the ``pause_at``-th, once it is
stored and before the client gets any of it (a whole reply is returned after ``record``; a
stream's terminal event waits for it), the worker prints ``PID paused`` and sleeps, so the test
kills it right between "recorded" and "delivered".
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

# Imported before the fork, so a worker serves at once: the server and its dependencies.
import uvicorn  # noqa: F401

import comal.cli._serve
import comal.serve._app  # noqa: F401
from comal.serve import _record

# The fork server lives beside the other drivers, one folder up.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _fork_server import run_cli, say, serve


def _probed(pause_at: int | None) -> None:
    me = os.getpid()
    lock = threading.Lock()
    count = 0
    original = _record.Recorder.record

    def record(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal count
        original(self, *args, **kwargs)
        with lock:
            count += 1
            now = count
        if now == pause_at:
            say(f"{me} paused {now}")
            time.sleep(120)

    _record.Recorder.record = record  # type: ignore[method-assign]


def work(cmd: dict[str, Any]) -> int:
    _probed(cmd.get("pause_at"))
    say(f"{os.getpid()} started")
    return run_cli(cmd["argv"])  # uvicorn's log lines are the test's to ignore


def main() -> None:
    serve(work, poll=0.005)


if __name__ == "__main__":
    main()
