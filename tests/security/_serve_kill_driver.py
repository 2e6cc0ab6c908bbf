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

import json
import os
import selectors
import sys
import threading
import time
from typing import Any

# Imported before the fork, so a worker serves at once: the server and its dependencies.
import uvicorn  # noqa: F401

import comal.cli._serve
import comal.serve._app  # noqa: F401
from comal.cli import main as comal_main
from comal.serve import _record


def say(text: str) -> None:
    # One short write per line: lines from threads and processes never interleave in the pipe.
    os.write(1, (text + "\n").encode())


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
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)  # uvicorn's log lines are the test's to ignore
    say(f"{os.getpid()} started")
    try:
        comal_main(cmd["argv"])
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def main() -> None:
    say("ready")
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    buffer = b""
    children: set[int] = set()
    open_input = True
    while open_input or children:
        if open_input and sel.select(timeout=0.005):
            chunk = os.read(0, 65536)
            if not chunk:
                open_input = False
                sel.unregister(0)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    code = 0
                    try:
                        code = work(json.loads(line))
                    except BaseException as exc:
                        say(f"{os.getpid()} failed {type(exc).__name__}: {exc}")
                        code = 1
                    finally:
                        sys.stdout.flush()
                        os._exit(code)
                children.add(pid)
                say(f"spawned {pid}")
        elif not open_input:
            time.sleep(0.005)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                say(f"exit {pid} {code}")


if __name__ == "__main__":
    main()
