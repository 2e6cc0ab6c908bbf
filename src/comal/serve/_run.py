"""Running the application: in the foreground (``comal serve``) or in a background thread
(tests, benchmarks), always with uvicorn and the application's own connection bounds
(:mod:`._limits`: head deadline, keep-alive, connection cap)."""

from __future__ import annotations

import errno
import gc
import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn
from fastapi import FastAPI

from ._config import ServeConfig
from ._errors import AddressInUse, CannotListen
from ._limits import bounded_protocol

__all__ = [
    "ServerThread",
    "free_port",
    "listen_on",
    "serve_forever",
    "settle_heap",
    "uvicorn_config",
]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def uvicorn_config(
    app: FastAPI, host: str, port: int, *, log_level: str = "warning"
) -> uvicorn.Config:
    """uvicorn's settings for ``app``, with the bounds of the app's :class:`ServeConfig`."""
    config = getattr(app.state, "config", None)
    if not isinstance(config, ServeConfig):
        config = ServeConfig()
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        ws="none",
        http=bounded_protocol(config.header_timeout, config.max_connections),
        timeout_keep_alive=config.keep_alive_timeout,
        limit_concurrency=config.max_connections,
        # uvicorn's default, said here: a request head over 16 KiB is refused with 400.
        h11_max_incomplete_event_size=16 * 1024,
    )


def listen_on(host: str, port: int) -> socket.socket:
    """The server's socket, bound as uvicorn binds one, so a port another process holds is a
    coded error before anything is printed, and nothing can take it between the check and
    the start (uvicorn is handed this socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Named TCP (not protocol 0): asyncio turns Nagle's algorithm off only on sockets whose
    # ``proto`` says TCP, and accepted sockets inherit it. With it on, a reply's last small
    # segment waited for the client's delayed ACK: ~40 ms on every request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        where = f"{host or '*'}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"{where} is already in use (another comal serve?); stop that process or pass "
                "another --port"
            ) from exc
        why = exc.strerror or type(exc).__name__
        raise CannotListen(
            f"cannot listen on {where}: {why}; pass a --host this machine has and a --port "
            "you may use (ports below 1024 need privileges)"
        ) from exc
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve_forever(
    app: FastAPI,
    host: str,
    port: int,
    *,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> None:
    server = uvicorn.Server(uvicorn_config(app, host, port, log_level=log_level))
    settle_heap()
    server.run(sockets=None if sock is None else [sock])


def settle_heap() -> None:
    """What the built application holds for good (the tokenizer's tables, engines, schemas:
    a few hundred thousand objects) is moved out of the cyclic collector's reach: each full
    collection walked all of it again, a few milliseconds that fell on whichever request was
    running. For a process that serves from here on (``comal serve``, each of its workers)."""
    gc.collect()
    gc.freeze()


class ServerThread:
    """uvicorn serving ``app`` on ``host:port`` (a free port when 0) in a daemon thread."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.server = uvicorn.Server(uvicorn_config(app, host, self.port))
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"comal serve did not start on {self.url}")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=20)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
