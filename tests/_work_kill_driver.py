"""Child process for the long-work kill loop: forks real ``comal`` CLI runs the test kills.

It imports comal once, prints ``ready`` and reads one JSON command per line on stdin:
``{"argv", "env", "pause_at", "pause_on"}``. For each it forks a worker and prints ``spawned
PID``; when a worker ends it prints ``exit PID CODE`` (``-SIGNAL`` for a killed one). Forking
keeps dozens of kills within seconds where as many fresh interpreters would take minutes; the
worker runs the command line
itself, ``comal.cli.main(argv)`` — ``comal -p …`` or ``comal --resume ID -p`` — with ``env``
set. Every phase of the agents (the coordinator's and its work steps', in their threads) and of
their houses is counted; at the ``pause_at``-th the worker prints ``PID paused`` and sleeps, so
the test kills it right there (``pause_on`` names the phase instead: ``"written aw1"``, its
detail's start). Without either it runs on and the test kills it after a
random delay (or lets it finish).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import comal.cli  # noqa: F401  (imported once, before the forks)
from _fork_server import run_cli, say, serve
from comal.agent import _runtime


def _probed(pause_at: int | None, pause_on: str | None) -> None:
    """Give every agent and house of this process the counting probe."""
    me = os.getpid()
    lock = threading.Lock()
    count = 0

    def probe(phase: str, detail: str) -> None:
        nonlocal count
        with lock:
            count += 1
            now = count
        if now == pause_at or (pause_on and f"{phase} {detail}".startswith(pause_on)):
            say(f"{me} paused {phase} {detail}")
            time.sleep(120)

    run, houses = _runtime.Runtime.run, _runtime.Runtime.houses

    def probed_run(self: Any, prompt: str | None, **kw: Any) -> Any:
        kw["probe"] = probe
        return run(self, prompt, **kw)

    def probed_houses(self: Any, approver: Any = None) -> Any:
        return houses(self, approver).but(probe=probe)

    _runtime.Runtime.run = probed_run  # type: ignore[method-assign]
    _runtime.Runtime.houses = probed_houses  # type: ignore[method-assign]


def work(cmd: dict[str, Any]) -> int:
    os.environ.update(cmd["env"])
    _probed(cmd.get("pause_at"), cmd.get("pause_on"))
    say(f"{os.getpid()} started")
    return run_cli(cmd["argv"])


def main() -> None:
    serve(work)


if __name__ == "__main__":
    main()
