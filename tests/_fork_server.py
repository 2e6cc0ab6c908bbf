"""The fork server every kill loop's driver runs (import once, fork a worker per command), and
the test's side of it (:class:`Zygote`).

A driver imports comal and what its workers need, then calls :func:`serve`: it prints
``ready``, reads one JSON command per line on stdin, forks a worker that runs ``work(command)``
and prints ``spawned PID``; when a worker ends it prints ``exit PID CODE`` (``-SIGNAL`` for a
killed one). A fresh interpreter takes seconds to import comal; a fork takes milliseconds, so
dozens of SIGKILLs fit in a bounded test.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Zygote", "say", "serve"]


def say(text: str) -> None:
    # One short write per line: lines from threads and processes never interleave in the pipe.
    os.write(1, (text + "\n").encode())


def run_cli(argv: list[str]) -> int:
    """``comal ARGV`` in this (forked) worker, its stderr dropped (the test checks what the
    ledger and the workspace hold, not what was printed): its exit status."""
    from comal.cli import main as comal_main

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        comal_main(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def serve(work: Callable[[dict[str, Any]], int | None], *, poll: float = 0.002) -> None:
    say("ready")
    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ)
    buffer = b""
    children: set[int] = set()
    open_input = True
    while open_input or children:
        if open_input and sel.select(timeout=poll):
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
                        code = work(json.loads(line)) or 0
                    except BaseException as exc:
                        say(f"{os.getpid()} failed {type(exc).__name__}: {exc}")
                        code = 1
                    finally:
                        sys.stdout.flush()
                        os._exit(code)
                children.add(pid)
                say(f"spawned {pid}")
        elif not open_input:
            time.sleep(poll)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                say(f"exit {pid} {code}")


class Zygote:
    """The test's side: starts ``driver`` (a script that calls :func:`serve`), spawns workers
    with a command each and reads what they report, line by line."""

    def __init__(self, driver: Path, stderr: Path, env: dict[str, str] | None = None) -> None:
        self._err = stderr.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(driver)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            cwd=driver.parent,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.backlog: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        assert self.next() == "ready"

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))

    def next(self, timeout: float = 60) -> str:
        return self.backlog.pop(0) if self.backlog else self.lines.get(timeout=timeout)

    def spawn(self, cmd: dict[str, Any]) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()
        skipped: list[str] = []
        while True:
            line = self.lines.get(timeout=60)
            if line.startswith("spawned "):
                # A worker may speak before the server says it spawned it: keep its lines.
                self.backlog = skipped + self.backlog
                return int(line.split()[1])
            skipped.append(line)

    def until(self, pid: int, *events: str, timeout: float = 120) -> tuple[str, str]:
        """Read lines until worker ``pid`` reports one of ``events`` (``exit`` included)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.next(max(0.01, deadline - time.monotonic()))
            parts = line.split(" ", 2)
            if parts[0] == "exit" and int(parts[1]) == pid:
                return "exit", parts[2]
            if parts[0] == str(pid) and len(parts) > 1:
                assert parts[1] != "failed", line
                if parts[1] in events:
                    return parts[1], parts[2] if len(parts) > 2 else ""
        raise AssertionError(f"worker {pid} reported none of {events}")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._reader.join(timeout=60)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._err.close()
