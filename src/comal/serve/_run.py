"""Running the application: in the foreground (``comal serve``) or in a background thread
(tests, benchmarks), always with uvicorn and the application's own connection bounds
(:mod:`._limits`: head deadline, keep-alive, connection cap)."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn
from fastapi import FastAPI

from ._config import ServeConfig
from ._limits import bounded_protocol

__all__ = ["ServerThread", "free_port", "serve_forever", "uvicorn_config"]


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


def serve_forever(app: FastAPI, host: str, port: int, *, log_level: str = "warning") -> None:
    uvicorn.Server(uvicorn_config(app, host, port, log_level=log_level)).run()


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
