"""``comal serve --workers N``: N processes serving one listening socket, on one ledger (SCL-1).

The parent binds the socket, then forks the workers before it has opened anything else (no
ledger connection, no thread crosses a fork). Each worker builds its own application, with its
own ledger connection, and serves the inherited socket; the kernel hands each new connection
to one of them. Nothing is shared between workers but the ledger: what is new in a request is
decided inside the write transaction, against the ledger, so any worker may take any turn of
any conversation (``tests/serve/test_serve_workers.py``). On SQLite the workers' writes take
turns at the ledger's writer gate; on PostgreSQL each worker has its own connection.

The parent supervises: a worker that dies is replaced (a worker that dies within a second of
starting, twice in a row, stops the server with its exit status), and SIGINT or SIGTERM to the
parent stops every worker. A worker that starts while its ledger does not answer (a database
restarting) waits for it, up to a minute, rather than dying at once. Responses carry
``x-comal-worker`` (the worker's number), so a test or an operator can see the load spread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._run import serve_forever

__all__ = ["WORKER_HEADER", "serve_workers"]

WORKER_HEADER = "x-comal-worker"
_QUICK_DEATH_S = 1.0
_LEDGER_WAIT_S = 60.0  # how long a starting worker waits for a ledger that does not answer


class _WorkerMark:
    """ASGI middleware: every response carries the worker's number. Plain ASGI, not the
    ``http`` middleware decorator: that one runs each request's app in a task of its own and
    hands the body through memory streams, on every request the worker serves."""

    def __init__(self, app: ASGIApp, index: int) -> None:
        self.app = app
        self.index = str(index)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[WORKER_HEADER] = self.index
            await send(message)

        await self.app(scope, receive, marked)


def _mark(app: FastAPI, index: int) -> None:
    app.add_middleware(_WorkerMark, index=index)


def _app_once_the_ledger_answers(make_app: Callable[[], FastAPI]) -> FastAPI:
    """The worker's application. The parent reached the ledger before it forked, so a ledger
    that does not answer now is away for a while (a database restarting): the worker waits for
    it, bounded. Dying at once, it would die again at once, and two quick deaths stop the
    whole server, every other worker with it."""
    from ..ledger import LedgerUnavailable

    deadline = time.monotonic() + _LEDGER_WAIT_S
    said = False
    while True:
        try:
            return make_app()
        except LedgerUnavailable as exc:
            if time.monotonic() > deadline:
                raise
            if not said:
                print(f"comal serve: waiting for the ledger: {exc}", file=sys.stderr, flush=True)
                said = True
            time.sleep(0.5)


def _worker(
    make_app: Callable[[], FastAPI], index: int, host: str, port: int, sock: socket.socket
) -> None:
    """The child's whole life: never returns into the parent's code."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        app = _app_once_the_ledger_answers(make_app)
        _mark(app, index)
        serve_forever(app, host, port, sock=sock)
    except BaseException:  # said on stderr; the parent sees the status
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve_workers(
    make_app: Callable[[], FastAPI],
    host: str,
    port: int,
    sock: socket.socket,
    workers: int,
    *,
    say: Callable[[str], Any] = print,
) -> int:
    """Fork ``workers`` processes serving ``sock`` and supervise them until SIGINT/SIGTERM;
    the exit status (0, or a failing worker's)."""
    children: dict[int, tuple[int, float]] = {}  # pid -> (worker number, started at)
    stopping = False
    quick: dict[int, int] = {}

    def spawn(index: int) -> None:
        pid = os.fork()
        if pid == 0:
            _worker(make_app, index, host, port, sock)
        children[pid] = (index, time.monotonic())

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for index in range(workers):
            spawn(index)
        while children:
            try:
                pid, raw = os.wait()
            except ChildProcessError:
                break
            except InterruptedError:  # pragma: no cover - Python retries wait() itself
                continue
            if pid not in children:
                continue
            index, started = children.pop(pid)
            code = os.waitstatus_to_exitcode(raw)
            if stopping:
                continue
            early = time.monotonic() - started < _QUICK_DEATH_S
            quick[index] = quick.get(index, 0) + 1 if early else 0
            if quick[index] >= 2:
                say(f"comal serve: worker {index} failed at start (status {code}); stopping")
                status = code or 1
                stop(signal.SIGTERM, None)
                continue
            say(f"comal serve: worker {index} (pid {pid}) ended with status {code}; restarting")
            spawn(index)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        sock.close()
    return status
