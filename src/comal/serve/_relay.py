"""Streaming a turn's reply to the client: relayed event by event, or spliced across recall.

:meth:`Relay._relay` passes an upstream stream through byte for byte and records the reply when
its terminal event arrives, before the client gets it (a client that has the whole reply finds
it in the ledger). :meth:`Relay._splice` streams a turn that offers recall tools: events go
through as they arrive (the protocol's splicer holds the tool calls and renumbers what it
forwards: :class:`~comal.messages.wire.Splicer`);
when the reply ends with a recall call the proxy runs it through the house, asks upstream
again and continues the same client stream, until a reply without one, or the ``max_recalls``
bound. A stream that breaks (upstream or client) is recorded as an interrupted response; the
recall rounds before it stay recorded as the complete steps they are.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx
from httpx_sse import EventSource

from ..ledger import LedgerBusy, LedgerUnavailable
from ._record import Call, Exchange, Recorder, read_reply
from ._turn import Turn
from ._upstream import Tee, response_headers

if TYPE_CHECKING:
    from ._config import ServeConfig

__all__ = ["Forward", "Relay"]


@dataclass
class Forward:
    """A response for the client: ``body`` is bytes, or an async iterator for a stream.
    ``sent`` is called once the whole body went out (not when the client left first)."""

    status: int
    headers: dict[str, str]
    body: bytes | AsyncIterator[bytes]
    media_type: str = "application/json"
    sent: Callable[[], None] | None = None


class Relay:
    """The streaming half of :class:`~comal.serve._proxy.ProxyService` (a mixin: it uses the
    service's upstream client, recorder and turn builder)."""

    client: httpx.AsyncClient
    recorder: Recorder
    config: ServeConfig

    if TYPE_CHECKING:
        # Provided by the service this is mixed into (ProxyService).
        def _headers(self, call: Call, turn: Turn | None) -> dict[str, str]: ...
        def _fail(self, call: Call, turn: Turn, status: int, message: str) -> Forward: ...
        async def _turn(self, call: Call, *, allow_recall: bool) -> Turn | Forward: ...

    async def _relay(self, call: Call, turn: Turn) -> Forward:
        """Stream ``turn``'s reply to the client event by event, recording it at the end."""
        started = time.perf_counter()
        response = await self._open(call, turn)
        if isinstance(response, Forward):
            return response
        if response.status_code >= 400 or not _is_stream(response):
            return await self._whole(call, turn, response, started)
        headers = {**response_headers(response.headers), **self._headers(call, turn)}
        return Forward(
            200, headers, self._events(call, turn, response, started), "text/event-stream"
        )

    async def _events(
        self, call: Call, turn: Turn, response: httpx.Response, started: float
    ) -> AsyncIterator[bytes]:
        acc = call.protocol.accumulator()
        pending: list[bytes] = []
        first: float | None = None
        broken: str | None = None
        recorded = False
        tee = httpx.Response(
            200, headers=response.headers, stream=Tee(response.aiter_bytes(), pending.append)
        )
        try:
            try:
                async for event in EventSource(tee).aiter_sse():
                    acc.feed(event.event, event.data)
                    if acc.done and not recorded and acc.error is None:
                        # Stored before the client sees the end: a client that has the whole
                        # reply finds it in the ledger.
                        recorded = True
                        reply, unparsed = read_reply(acc.reply)
                        exchange = Exchange(200, {}, b"", reply, _ms(started), unparsed=unparsed)
                        meta = {"first_byte_ms": first}
                        try:
                            await anyio.to_thread.run_sync(
                                self.recorder.record, call, turn, exchange, meta
                            )
                        except (LedgerUnavailable, LedgerBusy) as exc:
                            # Nothing of the reply was stored (the database went away): the
                            # client is told in the stream's own error shape, so its retry is
                            # a first attempt again.
                            yield call.protocol.stream_error(f"[{exc.code}] {exc}")
                            return
                    if pending:
                        data = b"".join(pending)
                        if not recorded and _holds_end(call.protocol.ends, data):
                            # One network chunk can carry the terminal event after this one:
                            # it reaches the client only once the reply is stored.
                            continue
                        pending.clear()
                        first = first if first is not None else _ms(started)
                        yield data
                if pending:
                    yield b"".join(pending)
            except httpx.HTTPError as exc:
                broken = f"upstream stream broke: {exc}"
            if not recorded and acc.error is None:
                # The client's SDK would take a stream that just stops for a whole reply.
                yield call.protocol.stream_error(broken or "the upstream stream ended early")
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
                if not recorded:
                    if broken is None and acc.error is not None:
                        broken = "upstream sent an error event"
                    elif broken is None and acc.done is False:
                        broken = "the stream ended (or the client left) before the reply ended"
                    await anyio.to_thread.run_sync(
                        self.recorder.interrupted,
                        call,
                        turn,
                        acc,
                        broken or "the reply did not finish",
                    )

    async def _open(self, call: Call, turn: Turn) -> httpx.Response | Forward:
        """Send ``turn`` upstream for a streamed reply; a failure to connect is a Forward."""
        try:
            request = self.client.build_request(
                "POST", call.url, content=turn.body, headers=call.headers
            )
            return await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            return await anyio.to_thread.run_sync(
                self._fail, call, turn, 504, f"upstream timed out: {exc}"
            )
        except httpx.HTTPError as exc:
            return await anyio.to_thread.run_sync(
                self._fail, call, turn, 502, f"upstream unreachable: {exc}"
            )

    async def _whole(
        self, call: Call, turn: Turn, response: httpx.Response, started: float
    ) -> Forward:
        """An upstream answer that is not a stream (an error, or a server that ignored
        ``stream``): recorded, and given to the client as it came."""
        headers = {**response_headers(response.headers), **self._headers(call, turn)}
        body = await response.aread()
        await response.aclose()
        exchange = Exchange(response.status_code, headers, body, None, _ms(started))
        if response.status_code < 400:
            exchange.reply, exchange.unparsed = read_reply(lambda: call.protocol.reply(_json(body)))
            await anyio.to_thread.run_sync(self.recorder.record, call, turn, exchange)
        else:
            await anyio.to_thread.run_sync(
                self.recorder.request_record,
                call,
                turn,
                None,
                None,
                {"error": response.status_code},
            )
        return Forward(response.status_code, headers, body)

    async def _splice(self, call: Call, turn: Turn, rounds: int) -> Forward:
        """Stream a turn that offers recall tools (see the module docstring)."""
        started = time.perf_counter()
        response = await self._open(call, turn)
        if isinstance(response, Forward):
            return response
        if response.status_code >= 400 or not _is_stream(response):
            return await self._whole(call, turn, response, started)
        headers = {**response_headers(response.headers), **self._headers(call, turn)}
        events = self._spliced(call, turn, response, started, rounds)
        return Forward(200, headers, events, "text/event-stream")

    async def _spliced(
        self, call: Call, turn: Turn, response: httpx.Response, started: float, rounds: int
    ) -> AsyncIterator[bytes]:
        assert call.protocol.splicer is not None  # recall is offered only where one is
        splice = call.protocol.splicer()
        first: float | None = None
        recorded = False
        current: httpx.Response | None = response
        acc = call.protocol.accumulator()
        why: str | None = None
        try:
            while current is not None:
                acc = call.protocol.accumulator()
                splice.start(turn.offered)
                round_started = time.perf_counter()
                try:
                    async for event in EventSource(current).aiter_sse():
                        acc.feed(event.event, event.data)
                        out = splice.feed(event.event, event.data)
                        if out:
                            first = first if first is not None else _ms(started)
                            yield out
                        if acc.done or acc.error is not None:
                            break
                except httpx.HTTPError as exc:
                    why = f"upstream stream broke: {exc}"
                finally:
                    with anyio.CancelScope(shield=True):
                        await current.aclose()
                current = None
                if why is not None or not acc.done or acc.error is not None:
                    if why is None:
                        why = (
                            "upstream sent an error event"
                            if acc.error is not None
                            else "the upstream stream ended early"
                        )
                    if acc.error is None:
                        yield call.protocol.stream_error(why)
                    return
                splice.end()
                reply, unparsed = read_reply(acc.reply)
                exchange = Exchange(200, {}, b"", reply, _ms(round_started), unparsed=unparsed)
                internal = [
                    c
                    for c in (reply.message.tool_calls if reply and reply.message else ())
                    if c.name in turn.offered
                ]
                if not internal:
                    # Stored before the client sees the end (as the plain relay does).
                    meta: dict[str, Any] = {"first_byte_ms": first, "rounds": splice.rounds}
                    tail = splice.finish()
                    # As in _events: once recording starts, the reply is not "interrupted".
                    recorded = True
                    await anyio.to_thread.run_sync(
                        self.recorder.record, call, turn, exchange, meta, splice.shown()
                    )
                    yield tail
                    return
                splice.drop()
                await anyio.to_thread.run_sync(self.recorder.recall, call, turn, exchange)
                rounds += 1
                made = await self._turn(call, allow_recall=rounds < self.config.max_recalls)
                if isinstance(made, Forward):
                    why = "the turn after a recall could not be assembled"
                    yield call.protocol.stream_error(_message(made))
                    recorded = True  # the refusal is the turn's outcome; nothing half-written
                    return
                turn = made
                round_started = time.perf_counter()
                opened = await self._open(call, turn)
                if isinstance(opened, Forward):
                    recorded = True  # _fail recorded the request
                    yield call.protocol.stream_error(_message(opened))
                    return
                if opened.status_code >= 400 or not _is_stream(opened):
                    body = await opened.aread()
                    await opened.aclose()
                    await anyio.to_thread.run_sync(
                        self.recorder.request_record,
                        call,
                        turn,
                        None,
                        None,
                        {"error": opened.status_code, "after_recall": True},
                    )
                    recorded = True
                    message = f"upstream answered {opened.status_code} after a recall: "
                    yield call.protocol.stream_error(message + body.decode(errors="replace"))
                    return
                current = opened
        finally:
            with anyio.CancelScope(shield=True):
                if current is not None:
                    await current.aclose()
                if not recorded:
                    reason = why or "the stream ended (or the client left) before the reply ended"
                    await anyio.to_thread.run_sync(
                        self.recorder.interrupted, call, turn, acc, reason
                    )


def _is_stream(response: httpx.Response) -> bool:
    kind: str = response.headers.get("content-type", "")
    return kind.startswith("text/event-stream")


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _holds_end(ends: tuple[bytes, ...], data: bytes) -> bool:
    """Whether ``data`` may hold the stream's terminal event (a false alarm only delays)."""
    return any(mark in data for mark in ends)


def _message(forward: Forward) -> str:
    body = forward.body if isinstance(forward.body, bytes) else b""
    value = _json(body)
    error = value.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return f"the proxy could not continue the turn (status {forward.status})"
