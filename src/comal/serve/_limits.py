"""How long a client may take, and how many connections it may hold.

uvicorn bounds a kept-alive connection's idle time between requests (``timeout_keep_alive``),
a request head's size (``h11_max_incomplete_event_size``) and concurrent work
(``limit_concurrency``, answered 503), but nothing bounds the *time* a client takes to send a
request: a client that sends one header line, or one body byte, every few seconds holds its
connection forever, and a few hundred of them exhaust the server. So:

- :func:`bounded_protocol` is uvicorn's h11 protocol with a header deadline: from the moment a
  connection opens, or the first byte of its next request arrives, the request head must be
  complete within ``header_timeout`` or the connection is closed; so must a body the route
  answered without reading (a refusal). It also closes at once a connection beyond
  ``max_connections`` instead of letting it wait for its 503.
- :class:`BodyDeadline` is ASGI middleware: once the head is in, the body must be complete
  within ``body_timeout``; past it the client gets a 408 (in the route's error shape) and the
  connection is closed. Reading after the body (waiting for a disconnect while a reply streams)
  is not bounded.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anyio
import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from ._errors import RequestTimeout
from ._upstream import refusal

__all__ = ["BodyDeadline", "bounded_protocol"]

log = logging.getLogger("comal.serve")


class _Bounded(H11Protocol):
    header_timeout: float = 10.0
    max_connections: int = 1_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning("closing a connection over the limit of %d", self.max_connections)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # IDLE after new bytes: the head of a request has begun and is not complete yet.
        waiting = self.conn.their_state is h11.IDLE or self._unread_body()
        if waiting and not self.transport.is_closing():
            self._arm()
        else:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Between requests the keep-alive timer runs; the deadline starts with new bytes.
        if self._unread_body():
            self._arm()
        else:
            self._disarm()

    def _unread_body(self) -> bool:
        """The route answered (a 401, say) without reading a body the client still sends:
        nothing else bounds that wait."""
        answered = self.cycle is not None and self.cycle.response_complete
        return answered and self.conn.their_state is h11.SEND_BODY

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            log.info("closing a connection whose request head took over %ss", self.header_timeout)
            self.transport.close()


def bounded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a request-head deadline and a connection cap."""
    return type(
        "BoundedH11Protocol",
        (_Bounded,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )


def _has_body(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
    return False


class BodyDeadline:
    """ASGI middleware: a request body must arrive within ``timeout`` seconds of its head."""

    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = anyio.current_time() + self.timeout
        # A request without a body has nothing to wait for: its later reads (a route waiting
        # for the client to leave while it streams events) are never bounded.
        body_done = not _has_body(scope)
        expired = False
        started = False

        async def bounded_receive() -> Message:
            nonlocal body_done, expired, started
            if expired:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.0)):
                    message = await receive()
            except TimeoutError:
                expired = True
                if not started:
                    started = True
                    late = RequestTimeout(
                        f"the request body did not arrive within {self.timeout:g} s of its "
                        "headers; send it at once (the server closes slow connections)"
                    )
                    await refusal(scope["path"], late)(scope, receive, send)
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if expired:
                return  # the 408 went out instead of whatever the route makes of the cut body
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracked_send)
        except Exception:
            if not expired:
                raise
            # The route saw the body cut short (a disconnect) after the client was answered.
            log.debug("a request cut at its body deadline ended its route with an error")
