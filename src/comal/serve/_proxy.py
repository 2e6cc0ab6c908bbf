"""The proxy service: what a route handler calls, and everything it does with the ledger.

:meth:`ProxyService.handle` takes one client request (route, raw body, headers, tenant) and
returns a :class:`Forward` — status, headers and a body, whole or streamed. On the way: the
request is routed to its session and only what is new is appended (:mod:`._sessions`); the
engine assembles what goes upstream (:mod:`._turn`); the reply is recorded as a step with its
normalized usage (TOK-1), and the request record keeps what was sent (the assembly's stage,
actions, tokens and metrics). Ledger work runs in worker threads (the ledger is synchronous).

Recall: when the engine stands in for part of the history (references, a checkpoint, summaries,
evicted or rewritten messages), its recall tools (``Engine.model_tools``: EvidenceRead, the dag's
``ctx_*``, the pipeline's ``session_search``) are added upstream beside the client's. When the
model calls one, the proxy runs the call through the house (judged, receipted; on a ledger
connection of its own and outside the router's lock, so another tenant's request never waits for
it, :mod:`._record`), appends it as a recall step the client never sees, and asks again, at most
``max_recalls`` times per client request, so the client never sees a call to a tool it did not
declare. A whole reply is read whole; a stream is streamed on across the rounds (:mod:`._relay`,
:class:`~comal.messages.wire.Splicer`). Streams without recall are relayed event by event, byte
for byte. Every protocol part (reading the request, the reply, errors, the stream) is the
route's :class:`~comal.messages.wire.WireProtocol`'s.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import anyio
import httpx
from httpx_sse import EventSource

from ..context import Engine
from ..errors import ComalError, InputError
from ..ledger import LedgerBackend, LedgerBusy, LedgerUnavailable
from ..messages import sha256_hex
from ..messages.wire import WireProtocol
from ..ops import Registry, default_registry
from ._config import ServeConfig
from ._engine import EngineAdapter
from ._pairs import check_pairs
from ._record import Call, Exchange, Recorder, read_reply
from ._relay import Forward, Relay, _is_stream, _json, _ms
from ._replay import Stored, replay_body
from ._sessions import Answered, SessionRouter, client_key
from ._turn import Turn, build_turn, recall_tools
from ._upstream import (
    Tee,
    error_body,
    response_headers,
    upstream_headers,
    upstream_url,
)
from ._wire import parse_request

__all__ = ["Forward", "ProxyService"]

log = logging.getLogger("comal.serve")

_NO_RETRY = {"x-should-retry": "false"}


def _refused(protocol: WireProtocol, exc: ComalError) -> Forward:
    """``exc`` as the client reads it. The ledger away (a database restarting) or busy is no
    fault of the request: a 503 the client's SDK sends again, where a 400 would end its turn."""
    if isinstance(exc, LedgerUnavailable | LedgerBusy):
        body = error_body(protocol, 503, f"[{exc.code}] {exc}")
        return Forward(503, {"x-should-retry": "true", "retry-after": "1"}, body)
    return Forward(400, _NO_RETRY, error_body(protocol, 400, f"[{exc.code}] {exc}"))


def _agent_of(protocol: WireProtocol, headers: Mapping[str, str]) -> str:
    agent = headers.get("user-agent", "").lower()
    if agent.startswith("claude-cli") or "claude-code" in agent:
        return "claude-code"
    if agent.startswith("codex"):
        return "codex"
    return protocol.client


def recall_registry(engine: Engine) -> Registry:
    """The registry of ``engine``'s recall operations (its ``model_tools``: ``EvidenceRead``,
    the dag's ``ctx_*``, the pipeline's ``session_search``), the one list the agent's catalog
    also reads."""
    registry = default_registry()
    found = [registry.get(name) for name in engine.model_tools]
    return Registry([op for op in found if op is not None])


@dataclass
class _Held:
    session: str | None = None  # the session whose turn this request holds


class SessionTurns:
    """One request at a time in each session, from routing on (the request that adds to a
    session must find its reply before the next one reads the session, and a retry must find
    the attempt it repeats finished). A worker thread may take a free turn (:meth:`try_take`:
    the turn's first round is then built in the trip that routed it); a request that finds the
    turn held waits on the event loop (:meth:`take`), first come first served, and is handed
    the turn by :meth:`give` (event loop only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def try_take(self, session: str) -> bool:
        with self._lock:
            if session in self._held:
                return False
            self._held.add(session)
            return True

    async def take(self, session: str) -> None:
        with self._lock:
            if session not in self._held:
                self._held.add(session)
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(session, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            # Handed the turn just as this request was cancelled: hand it on.
            if waiter.done() and not waiter.cancelled():
                self.give(session)
            raise

    def give(self, session: str) -> None:
        with self._lock:
            queue = self._waiting.get(session)
            while queue:
                waiter = queue.popleft()
                if not waiter.done():  # a cancelled waiter is skipped
                    waiter.set_result(None)  # the turn stays held: it is the waiter's now
                    return
            self._waiting.pop(session, None)
            self._held.discard(session)

    def held(self) -> int:
        with self._lock:
            return len(self._held)


class ProxyService(Relay):
    """One per server: the ledger, the session router, the upstream client, the recall house."""

    def __init__(
        self,
        config: ServeConfig,
        ledger: LedgerBackend,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.router = SessionRouter(ledger)
        from ..agent import Config, house_factory

        operator = config.operator if config.operator is not None else Config()
        # The engine's settings come from the configuration when it names this engine.
        settings = dict(operator.engine_settings) if operator.engine == config.engine else None
        self.engine = EngineAdapter(config.engine, ledger.counter, settings)
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.upstream_timeout, connect=10.0),
            transport=transport,
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            # One client serves every tenant: a cookie an upstream sets in a reply to one
            # request must go up with no other (the client's own SDK keeps its cookies).
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
        )
        # The proxy runs the engine's recall operations only (the engine names them, as it does
        # for the agent's catalog), and only for the model.
        self.recall_registry = recall_registry(self.engine.engine)
        # Each protocol's recall schemas, made the first time a request of it needs them.
        self._recall_tools: dict[str, tuple[dict[str, Any], ...]] = {}
        self._turns = SessionTurns()
        # Recall calls are judged by a house of the one factory, under the operator's policy.
        houses = house_factory(ledger, operator, self.recall_registry)
        self.recorder = Recorder(ledger, self.router, houses)

    async def aclose(self) -> None:
        await self.client.aclose()
        self.recorder.recall_ledgers.close()

    def recall_tools(self, protocol: WireProtocol) -> tuple[dict[str, Any], ...]:
        found = self._recall_tools.get(protocol.name)
        if found is None:
            found = self._recall_tools[protocol.name] = recall_tools(protocol, self.recall_registry)
        return found

    async def passthrough(
        self,
        protocol: WireProtocol,
        path: str,
        query: str,
        raw: bytes,
        headers: Mapping[str, str],
        consumed_header: str | None,
        *,
        method: str = "POST",
    ) -> Forward | None:
        """Forward a request that holds no conversation turn (token counting, the model list)
        as it is; ``None`` when the upstream cannot be reached."""
        url = upstream_url(self.config, protocol, path, query)
        sent = upstream_headers(self.config, protocol, headers, consumed_header)
        try:
            response = await self.client.request(method, url, content=raw or None, headers=sent)
        except httpx.HTTPError:
            return None
        kind = response.headers.get("content-type", "application/json")
        return Forward(
            response.status_code, response_headers(response.headers), response.content, kind
        )

    # -- entry point ------------------------------------------------------------------------
    async def handle(
        self,
        protocol: WireProtocol,
        path: str,
        query: str,
        raw: bytes,
        headers: Mapping[str, str],
        tenant: str,
        consumed_header: str | None,
    ) -> Forward:
        try:
            request = parse_request(protocol, raw, tenant)
            # What the ledger's verify would call a fault is refused, as the provider would.
            check_pairs(request.messages)
        except InputError as exc:
            return Forward(400, _NO_RETRY, error_body(protocol, 400, f"[{exc.code}] {exc}"))
        key, source = client_key(request, headers)
        agent = _agent_of(protocol, headers)
        meta = {"protocol": protocol.name, "engine": self.config.engine, "model": request.model}
        meta |= {"key_source": source}
        digest = sha256_hex(raw)
        url = upstream_url(self.config, protocol, path, query)
        outgoing = upstream_headers(self.config, protocol, headers, consumed_header)

        held = _Held()

        def enter() -> tuple[Call, Answered | Turn | Forward | None]:
            # One trip to a worker thread: the route (one write transaction), the check of the
            # instructions (a read; a write only when they changed) and, when the session's
            # turn is free, the turn itself (its first round).
            routed = self.router.route(
                tenant, agent, key, request.messages, meta, digest, request.keys
            )
            call = Call(protocol, request, routed, url, outgoing, tenant, digest=digest)
            call.client_tools = {
                str(t.get("name") or (t.get("function") or {}).get("name"))
                for t in request.tools
                if isinstance(t, dict)
            }
            if routed.answered is None:
                # A retry's instructions are those of the attempt it repeats: noted by it.
                self.recorder.note_instructions(call)
            if not self._turns.try_take(call.scope.session):
                return call, None
            held.session = call.scope.session
            return call, self._first(call)

        try:
            try:
                call, first = await anyio.to_thread.run_sync(enter)
            except ComalError as exc:
                return _refused(protocol, exc)
            if held.session is None:
                # Another request of the session holds its turn: wait for it, then go on as
                # the thread would have.
                await self._turns.take(call.scope.session)
                held.session = call.scope.session
                first = await anyio.to_thread.run_sync(self._first, call)
            try:
                if isinstance(first, Answered):
                    forward = await self._replay(call, first)
                else:
                    forward = await self._serve(call, first)
            except (LedgerUnavailable, LedgerBusy) as exc:
                # The reply came but could not be recorded (the database went away meanwhile):
                # nothing of it was stored, so the client's retry is a first attempt again.
                return _refused(protocol, exc)
        finally:
            if held.session is not None:
                self._turns.give(held.session)
        forward.sent = lambda: self._sent(call)
        return forward

    def _first(self, call: Call) -> Answered | Turn | Forward:
        """Holding the session's turn (in a worker thread): the stored reply for a retry (see
        _sessions: recognised when routed, or now, when it waited for the attempt it repeats
        to finish; a request that added to its session is a first one), else the first round
        of the turn."""
        routed = call.routed
        answer = routed.answered
        if answer is None and not routed.appended and not routed.created:
            answer = self.router.answered(call.scope, len(call.request.messages), call.digest)
        if answer is not None:
            return answer
        # A streamed turn offers recall only where the protocol can splice its stream.
        splices = not call.request.stream or call.protocol.splicer is not None
        return self._build(call, allow_recall=self.config.max_recalls > 0 and splices)

    def _sent(self, call: Call) -> None:
        # Read when the body went out: a stream's reply is recorded while it is relayed.
        if call.reply_entry is not None:
            self.router.delivered(call.scope, call.reply_entry)

    async def _replay(self, call: Call, answer: Answered) -> Forward:
        """The stored reply, given again without an upstream call (:mod:`._replay`)."""
        stored = Stored(answer.message, answer.record, answer.record.model or call.request.model)
        options = call.request.body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        stream = call.request.stream
        body = replay_body(call.protocol, stored, stream=stream, include_usage=usage)
        await anyio.to_thread.run_sync(self.recorder.replayed, call, answer)
        call.reply_entry = answer.entry
        headers = {**self._headers(call, None), "x-comal-replay": str(answer.entry)}
        kind = "text/event-stream" if stream else "application/json"
        return Forward(200, headers, body, kind)

    # -- one turn ---------------------------------------------------------------------------
    async def _turn(self, call: Call, *, allow_recall: bool) -> Turn | Forward:
        return await anyio.to_thread.run_sync(lambda: self._build(call, allow_recall=allow_recall))

    def _build(self, call: Call, *, allow_recall: bool) -> Turn | Forward:
        """One round of the turn (in a worker thread: it reads the ledger and may store the
        engine's checkpoint)."""
        try:
            return build_turn(
                self.ledger,
                call.scope,
                call.request,
                call.routed.entry_ids,
                self.config,
                allow_recall=allow_recall,
                recall=self.recall_tools(call.protocol),
                engine=self.engine,
                stitched=call.routed.stitched,
            )
        except ComalError as exc:
            if isinstance(exc, LedgerUnavailable | LedgerBusy):
                return _refused(call.protocol, exc)
            # CONTEXT_OVERHEAD, CONTEXT_PRESSURE_LOOP: nothing is sent (TOK-5, LIM-5).
            return Forward(
                400,
                self._headers(call, None),
                error_body(call.protocol, 400, f"[{exc.code}] {exc}"),
            )

    def _headers(self, call: Call, turn: Turn | None) -> dict[str, str]:
        out = {"x-comal-session": call.scope.session}
        if turn is not None:
            out["x-comal-stage"] = turn.stage
            if turn.lowered_from is not None:
                out["x-comal-max-tokens"] = f"{turn.lowered_from}->{turn.max_tokens}"
        return out

    async def _serve(self, call: Call, first: Turn | Forward | None = None) -> Forward:
        rounds = 0
        while True:
            if rounds == 0 and first is not None:
                turn = first
            else:
                turn = await self._turn(call, allow_recall=rounds < self.config.max_recalls)
            if isinstance(turn, Forward):
                return turn
            if call.request.stream:
                if turn.offered_recall:
                    return await self._splice(call, turn, rounds)
                return await self._relay(call, turn)
            exchange = await self._exchange(call, turn)
            reply = exchange.reply
            internal = [
                c
                for c in (reply.message.tool_calls if reply and reply.message else ())
                if c.name in turn.offered
            ]
            if reply is not None and internal:
                await anyio.to_thread.run_sync(self.recorder.recall, call, turn, exchange)
                rounds += 1
                continue
            if exchange.status < 400:
                await anyio.to_thread.run_sync(self.recorder.record, call, turn, exchange)
            headers = {**exchange.headers, **self._headers(call, turn)}
            return Forward(exchange.status, headers, exchange.body, exchange.media_type)

    # -- upstream exchanges -----------------------------------------------------------------
    def _fail(self, call: Call, turn: Turn, status: int, message: str) -> Forward:
        self.recorder.request_record(call, turn, None, None, {"error": status, "message": message})
        return Forward(
            status, self._headers(call, turn), error_body(call.protocol, status, message)
        )

    async def _exchange(self, call: Call, turn: Turn) -> Exchange:
        """Send ``turn`` and read the whole reply (a stream is read to its end)."""
        started = time.perf_counter()
        acc = call.protocol.accumulator()
        chunks: list[bytes] = []
        try:
            request = self.client.build_request(
                "POST", call.url, content=turn.body, headers=call.headers
            )
            response = await self.client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            return await self._error_exchange(
                call, turn, 504, f"upstream timed out: {exc}", started
            )
        except httpx.HTTPError as exc:
            return await self._error_exchange(
                call, turn, 502, f"upstream unreachable: {exc}", started
            )
        try:
            if response.status_code >= 400 or not _is_stream(response):
                body = await response.aread()
                reply, unparsed = None, None
                if response.status_code < 400:
                    reply, unparsed = read_reply(lambda: call.protocol.reply(_json(body)))
                else:
                    await anyio.to_thread.run_sync(
                        self.recorder.request_record,
                        call,
                        turn,
                        None,
                        None,
                        {"error": response.status_code},
                    )
                return Exchange(
                    response.status_code,
                    response_headers(response.headers),
                    body,
                    reply,
                    _ms(started),
                    unparsed=unparsed,
                )
            tee = httpx.Response(
                200, headers=response.headers, stream=Tee(response.aiter_bytes(), chunks.append)
            )
            async for event in EventSource(tee).aiter_sse():
                acc.feed(event.event, event.data)
        except httpx.TimeoutException as exc:
            await anyio.to_thread.run_sync(
                self.recorder.interrupted, call, turn, acc, f"upstream timed out: {exc}"
            )
            return await self._error_exchange(
                call, turn, 504, f"upstream timed out: {exc}", started, record=False
            )
        except httpx.HTTPError as exc:
            await anyio.to_thread.run_sync(
                self.recorder.interrupted, call, turn, acc, f"upstream broke: {exc}"
            )
            return await self._error_exchange(
                call, turn, 502, f"upstream stream broke: {exc}", started, record=False
            )
        finally:
            await response.aclose()
        if not acc.done or acc.error is not None:
            why = "upstream sent an error event" if acc.error else "stream ended before its end"
            await anyio.to_thread.run_sync(self.recorder.interrupted, call, turn, acc, why)
            return await self._error_exchange(
                call, turn, 502, f"upstream {why}", started, record=False
            )
        reply, unparsed = read_reply(acc.reply)
        return Exchange(
            200,
            response_headers(response.headers),
            b"".join(chunks),
            reply,
            _ms(started),
            "text/event-stream",
            unparsed,
        )

    async def _error_exchange(
        self,
        call: Call,
        turn: Turn,
        status: int,
        message: str,
        started: float,
        *,
        record: bool = True,
    ) -> Exchange:
        if record:
            # The ledger is synchronous: its writes never run on the event loop.
            meta = {"error": status, "message": message}
            await anyio.to_thread.run_sync(
                self.recorder.request_record, call, turn, None, None, meta
            )
        return Exchange(status, {}, error_body(call.protocol, status, message), None, _ms(started))
