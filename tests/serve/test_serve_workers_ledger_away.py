"""``comal serve --workers 2`` on PostgreSQL while the database is away: a worker replaced then
waits for the ledger instead of dying at once, so the server outlives the outage and serves the
conversations afterwards, each once, in order (SCL-1).

The database goes away behind a TCP gate of the test's own in front of the test PostgreSQL
(shared, so never restarted itself): shutting the gate cuts every connection and refuses new
ones, as a restarting server does. Found by ``bench/multihost_faults.py``: a worker killed while
PostgreSQL restarted was replaced by one that could not open the ledger, died within a second,
twice, and the supervisor stopped the whole server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from _pg_support import fresh_schema, pg_dsn, url_with_schema
from comal.ledger import open_ledger
from comal.serve._run import free_port
from comal.testing import FakeServer

from .test_proxy_shared_ledger import MODEL, _check, _script
from .test_serve_workers import _worker_pids, _workers


class Gate:
    """A TCP forwarder to ``target`` on a port of its own, shut and opened again at will."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.open()

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # shut
                return
            upstream = socket.create_connection(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def shut(self) -> None:
        """Refuse new connections and cut every open one."""
        assert self._listener is not None
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._listener.close()
        for s in self._conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self._conns.clear()


def _turns(url: str, name: str, turns: int) -> list[dict[str, Any]]:
    """A conversation whose turns are sent again on a 5xx (the ledger away, or a worker's
    connection found cut on its first use after), as the providers' SDKs do."""
    messages: list[dict[str, Any]] = []
    headers = {"x-api-key": "sk", "anthropic-version": "2023-06-01", "x-comal-session": name}
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{name}: question {turn}"})
        body = {"model": MODEL, "max_tokens": 100, "messages": messages}
        for _ in range(60):
            reply = httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=60)
            if reply.status_code < 500:
                break
            time.sleep(0.2)
        assert reply.status_code == 200, reply.text
        text = "".join(b["text"] for b in reply.json()["content"] if b["type"] == "text")
        messages.append({"role": "assistant", "content": text})
    return messages


def test_a_worker_replaced_while_the_database_is_away_waits_for_it() -> None:
    # covers: SCL-1, LED-4
    dsn = pg_dsn()
    parts = urlsplit(dsn)
    gate = Gate((parts.hostname or "127.0.0.1", parts.port or 5432))
    gated = dsn.replace(parts.netloc.rsplit("@", 1)[-1], f"127.0.0.1:{gate.port}", 1)
    with fresh_schema() as schema:
        open_ledger(dsn, schema=schema).close()
        target = url_with_schema(gated, schema)
        with FakeServer(_script(40)) as fake, _workers(target, fake, 2) as (url, process):
            held = {"before": _turns(url, "before", 3)}
            gate.shut()
            victim = _worker_pids(process.pid)[0]
            os.kill(victim, signal.SIGKILL)
            # Its replacement meets the ledger away. It must outlive the supervisor's
            # quick-death window (two deaths within a second of starting stop the server).
            deadline = time.monotonic() + 30
            while True:
                assert process.poll() is None, "the server stopped while the database was away"
                assert time.monotonic() < deadline, "no replacement worker came"
                pids = set(_worker_pids(process.pid)) - {victim}
                if len(pids) == 2:
                    started = time.monotonic()
                    break
                time.sleep(0.05)
            while time.monotonic() - started < 2.5:
                assert process.poll() is None, "the server stopped while the database was away"
                assert set(_worker_pids(process.pid)) == pids, "a replacement died"
                time.sleep(0.1)
            gate.open()
            for k in range(4):  # on either worker: the kernel hands each connection out
                held[f"after-{k}"] = _turns(url, f"after-{k}", 3)
            assert set(_worker_pids(process.pid)) == pids
        with open_ledger(dsn, schema=schema) as led:
            _check(led, held)  # every conversation one session, each message once, in order
    gate.shut()
