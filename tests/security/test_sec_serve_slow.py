"""Issue 18: slow and idle clients cannot hold the server's connections.

60 of 60 connections sending one header line (or one body byte) every 3 s were all still open
after 45 s: uvicorn bounds a request head's size but not the time it takes, and nothing bounded
a body's time or the number of connections. The server here runs with short bounds (a second)
so the test stays fast; the assertions only say that every slow connection gets closed,
within a generous while, and that real clients are served afterwards.
"""

# covers: SCL-2

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from comal.serve import ServeConfig
from serve._support import proxy

from ._serve_support import BODY

CLIENTS = 60
GENEROUS = 30.0  # seconds; the bounds under test are 1 s


def _bounds(**bounds: Any) -> dict[str, Any]:
    """The short bounds, as far as this comal has them: on one without them the test mounts
    the same attack against the server as it is, and shows it held."""
    known = {f.name for f in dataclasses.fields(ServeConfig)}
    return {name: value for name, value in bounds.items() if name in known}


def _open(port: int, first: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(first)
    s.setblocking(False)
    return s


def _closed(s: socket.socket, got: bytearray) -> bool:
    """Whether the server closed ``s`` (what it sent before closing is kept in ``got``)."""
    while True:
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
        got += data


def _trickle(port: int, first: bytes, drip: Callable[[int], bytes]) -> list[bytes]:
    """Open :data:`CLIENTS` connections sending ``first``, then a drip each every 0.3 s until
    the server closes them all; returns what each got. Fails after :data:`GENEROUS` s."""
    socks = [_open(port, first) for _ in range(CLIENTS)]
    got = [bytearray() for _ in socks]
    open_ = set(range(CLIENTS))
    deadline = time.monotonic() + GENEROUS
    n = 0
    while open_ and time.monotonic() < deadline:
        time.sleep(0.3)
        n += 1
        for i in list(open_):
            if _closed(socks[i], got[i]):
                open_.discard(i)
                continue
            try:
                socks[i].send(drip(n))
            except OSError:
                open_.discard(i)
    for s in socks:
        s.close()
    assert not open_, f"{len(open_)} of {CLIENTS} slow connections still open after {GENEROUS}s"
    return [bytes(g) for g in got]


def test_slow_request_heads_are_closed(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "served"}], **_bounds(header_timeout=1.0)) as px:
        head = f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{px.server.port}\r\n".encode()
        _trickle(px.server.port, head, lambda n: f"X-Slow-{n}: 1\r\n".encode())
        # A connection that sends nothing at all is an idle one: closed as well.
        _trickle(px.server.port, b"", lambda n: b"")
        reply = px.anthropic().messages.create(**BODY)
        assert reply.content[0].text == "served"  # type: ignore[union-attr]
        assert len(px.fake.requests) == 1


def test_slow_request_bodies_are_closed_with_a_408(tmp_path: Path) -> None:
    bounds = _bounds(body_timeout=1.0, header_timeout=1.0)
    with proxy(tmp_path, [{"content": "served"}], **bounds) as px:
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{px.server.port}\r\n"
            "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"
        ).encode()
        answers = _trickle(px.server.port, head, lambda n: b" ")
        assert px.fake.requests == [] and px.ledger.sessions() == []
        answered = [a for a in answers if a]
        assert answered and all(a.startswith(b"HTTP/1.1 408") for a in answered)
        assert b'"type":"timeout_error"' in answered[0].replace(b" ", b"")
        reply = px.anthropic().messages.create(**BODY)
        assert reply.content[0].text == "served"  # type: ignore[union-attr]
        # A route that answers before reading the body (no key: 401) leaves a body nobody
        # reads: its trickle is bounded too.
        px.ledger.add_proxy_key("acme")
        time.sleep(1.1)  # the server's "are there keys?" cache
        answers = _trickle(px.server.port, head, lambda n: b" ")
        assert all(a.startswith(b"HTTP/1.1 401") for a in answers if a)


def test_connections_over_the_cap_are_closed(tmp_path: Path) -> None:
    bounds = _bounds(max_connections=10, header_timeout=60)
    with proxy(tmp_path, [{"content": "served"}], **bounds) as px:
        idle = [_open(px.server.port, b"") for _ in range(CLIENTS)]
        deadline = time.monotonic() + GENEROUS
        closed: set[int] = set()
        while len(closed) < CLIENTS - 10 and time.monotonic() < deadline:
            time.sleep(0.2)
            closed |= {i for i, s in enumerate(idle) if _closed(s, bytearray())}
        assert len(closed) >= CLIENTS - 10, f"only {len(closed)} of {CLIENTS} over the cap closed"
        for s in idle:
            s.close()
        time.sleep(0.5)  # the server notices the clients' own closes
        reply = px.anthropic().messages.create(**BODY)
        assert reply.content[0].text == "served"  # type: ignore[union-attr]
