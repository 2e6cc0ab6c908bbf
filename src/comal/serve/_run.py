"""Running the application: in the foreground (``comal serve``) or in a background thread
(tests, benchmarks), always with uvicorn."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn
from fastapi import FastAPI

__all__ = ["ServerThread", "free_port", "serve_forever"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_forever(app: FastAPI, host: str, port: int, *, log_level: str = "warning") -> None:
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


class ServerThread:
    """uvicorn serving ``app`` on ``host:port`` (a free port when 0) in a daemon thread."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port or free_port(host)
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
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
