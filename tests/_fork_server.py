"""The fork server every kill loop's driver runs: import once, fork a worker per command.

A driver imports comal and what its workers need, then calls :func:`serve`: it prints
``ready``, reads one JSON command per line on stdin, forks a worker that runs ``work(command)``
and prints ``spawned PID``; when a worker ends it prints ``exit PID CODE`` (``-SIGNAL`` for a
killed one). A fresh interpreter takes seconds to import comal; a fork takes milliseconds, so
dozens of SIGKILLs fit in a bounded test.
"""

from __future__ import annotations

import json
import os
import selectors
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["say", "serve"]


def say(text: str) -> None:
    # One short write per line: lines from threads and processes never interleave in the pipe.
    os.write(1, (text + "\n").encode())


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
