"""The ASGI application: proxy routes, the HTTP API, the dashboard, and who may use them.

Route handlers only read the HTTP request, resolve the tenant and hand over to the service
layer (:class:`~comal.serve._proxy.ProxyService`, :mod:`comal.serve._api`); no judgment or
assembly happens here.

Tenants: a request names its tenant with a proxy key (``x-comal-key``, or a ``comal_`` key in
the provider key header; never in the URL). On an explicit loopback address with no active key
in the ledger, requests without a key belong to one local tenant; once a key exists, or on any
other address (``""`` and ``0.0.0.0`` included), a valid key is required and anything else is
refused with 401 in the route's provider shape.

Before any route: :class:`~comal.serve._guard.Guard` refuses unknown ``Host`` names,
cross-origin browser requests and keys in URLs; :class:`~comal.serve._limits.BodyDeadline`
bounds the time a body may take. The dashboard's pages carry a Content-Security-Policy that
allows the server's own scripts only, and no third-party script is served (the API schema is
at ``/openapi.json``, browsable in the dashboard).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import (
    FileResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.background import BackgroundTask

from ..errors import InputError
from ..ledger import LedgerBackend, open_ledger
from ..messages.wire import (
    PROVIDER_ANTHROPIC,
    WireProtocol,
    protocol_for_headers,
    wire_protocol,
    wire_protocols,
)
from ..tokens import count_messages
from ._config import ServeConfig
from ._guard import Guard
from ._limits import BodyDeadline
from ._models import CATALOG_HEADER, catalog_model, catalog_models, upstream_answered
from ._proxy import Forward, ProxyService
from ._upstream import error_body, proxy_key_of
from ._wire import parse_request

__all__ = ["Tenant", "create_app"]

# The dashboard runs its own scripts and styles only; it is never framed.
_PAGE_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who is calling: the tenant, the key that proved it (``None``: the local tenant) and the
    header that carried the key (not forwarded upstream when it was a provider key header)."""

    name: str
    key_id: str | None
    consumed_header: str | None

    @property
    def actor_id(self) -> str:
        return f"{self.name}:{self.key_id}" if self.key_id else f"{self.name}:local"


class AuthError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Gate:
    """Resolves a request's tenant; caches "are there keys?" for a second."""

    def __init__(self, config: ServeConfig, ledger: LedgerBackend) -> None:
        self.config = config
        self.ledger = ledger
        self._keys_checked = 0.0
        self._keys_exist = False

    def _required(self) -> bool:
        if not self.config.loopback:
            return True
        now = time.monotonic()
        if now - self._keys_checked > 1.0:
            self._keys_exist = self.ledger.has_active_proxy_keys()
            self._keys_checked = now
        return self._keys_exist

    def known_tenant(self, headers: dict[str, str]) -> Tenant | None:
        """The tenant, where no ledger read is needed to say it (no key sent, on loopback, and
        the check for keys, under a second old, found none): called on the event loop, it
        saves a worker thread's round trip; ``None``: ask :meth:`tenant`."""
        if not self.config.loopback or self._keys_exist:
            return None
        if time.monotonic() - self._keys_checked > 1.0 or proxy_key_of(headers)[0] is not None:
            return None
        return Tenant(self.config.local_tenant, None, None)

    def tenant(self, headers: dict[str, str]) -> Tenant:
        key, header = proxy_key_of(headers)
        if key is not None:
            found = self.ledger.check_proxy_key(key)
            if found is None:
                raise AuthError(
                    "invalid or revoked comal proxy key; create one with `comal keys add "
                    "--tenant NAME` and send it as x-comal-key"
                )
            return Tenant(found.tenant, found.id, header)
        if self._required():
            where = "this server has proxy keys" if self.config.loopback else "not on loopback"
            raise AuthError(
                f"a comal proxy key is required ({where}); send it as the x-comal-key header "
                "or as the API key"
            )
        return Tenant(self.config.local_tenant, None, None)


async def _body(request: Request, limit: int) -> bytes | None:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _refuse(protocol: WireProtocol, status: int, message: str) -> Response:
    # As the providers do on a client error: an SDK must not retry what will fail again.
    headers = {"x-should-retry": "false"}
    return Response(error_body(protocol, status, message), status, headers, "application/json")


def _send(forward: Forward) -> Response:
    sent = forward.sent
    if isinstance(forward.body, bytes):
        # A background task runs once the body was sent (never for a client that left); on
        # the event loop, as a coroutine (``sent`` only notes what went out: a sync callable
        # would take a worker thread for it).
        task = None
        if sent is not None:
            done = sent

            async def noted() -> None:
                done()

            task = BackgroundTask(noted)
        return Response(
            forward.body,
            forward.status,
            headers=forward.headers,
            media_type=forward.media_type,
            background=task,
        )
    body = forward.body if sent is None else _then(forward.body, sent)
    return StreamingResponse(
        body, forward.status, headers=forward.headers, media_type=forward.media_type
    )


async def _then(body: AsyncIterator[bytes], sent: Callable[[], None]) -> AsyncIterator[bytes]:
    """``body``, then ``sent()`` once its last chunk went out (each ``yield`` returns only
    when the chunk was handed to the connection)."""
    async for chunk in body:
        yield chunk
    sent()


def create_app(
    config: ServeConfig,
    *,
    ledger: LedgerBackend | None = None,
    service: ProxyService | None = None,
) -> FastAPI:
    """The ``comal serve`` application over ``ledger`` (opened from ``config.ledger`` if not
    given, and closed with the app)."""
    owned = ledger is None
    led: LedgerBackend = ledger if ledger is not None else _open(config)
    proxy = service if service is not None else ProxyService(config, led)
    gate = Gate(config, led)
    from ._web_sessions import WebSessions

    web = WebSessions(config, led)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(web.close)
            await proxy.aclose()
            if owned:
                led.close()

    app = FastAPI(
        title="comal serve",
        version="1",
        description=(
            "comal's HTTP API: sessions, entries, per-turn assemblies, receipts, summaries, "
            "events (SSE) and approvals. The proxy routes (/v1/messages, "
            "/v1/chat/completions, /v1/responses) speak the providers' own APIs."
        ),
        lifespan=lifespan,
        # FastAPI's /docs and /redoc load their pages' scripts from a CDN, without integrity
        # checks, on the dashboard's origin: the schema is served, the dashboard browses it.
        docs_url=None,
        redoc_url=None,
    )
    # The last added runs first: the guard refuses before a body is read at all.
    app.add_middleware(BodyDeadline, timeout=config.body_timeout)
    app.add_middleware(Guard, config=config)

    app.state.config = config
    app.state.ledger = led
    app.state.proxy = proxy
    app.state.gate = gate
    app.state.web = web

    async def proxied(request: Request, protocol: WireProtocol) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        tenant = gate.known_tenant(headers)
        if tenant is None:
            try:
                tenant = await anyio.to_thread.run_sync(gate.tenant, headers)
            except AuthError as exc:
                return _refuse(protocol, 401, exc.message)
        raw = await _body(request, config.max_body_bytes)
        if raw is None:
            message = f"request body over the proxy's limit of {config.max_body_bytes:,} bytes"
            return _refuse(protocol, 413, message)
        forward = await proxy.handle(
            protocol,
            request.url.path,
            request.url.query,
            raw,
            headers,
            tenant.name,
            tenant.consumed_header,
        )
        return _send(forward)

    def serves(protocol: WireProtocol) -> Callable[[Request], Awaitable[Response]]:
        # A closure, not a default argument: FastAPI would read one as a request parameter.
        async def route(request: Request) -> Response:
            return await proxied(request, protocol)

        return route

    # Every registered protocol's routes (the built-in three and any a plugin adds).
    for protocol in wire_protocols().values():
        for path in protocol.routes:
            app.add_api_route(path, serves(protocol), methods=["POST"], include_in_schema=False)

    # Anthropic's token counting (the Messages API's own route).
    anthropic = wire_protocol(PROVIDER_ANTHROPIC)

    @app.post("/v1/messages/count_tokens", include_in_schema=False)
    async def count_tokens(request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            tenant = await anyio.to_thread.run_sync(gate.tenant, headers)
        except AuthError as exc:
            return _refuse(anthropic, 401, exc.message)
        raw = await _body(request, config.max_body_bytes)
        if raw is None:
            return _refuse(anthropic, 413, "request body over the proxy's limit")
        return await _count(proxy, led, anthropic, raw, headers, request.url.query, tenant)

    @app.get("/v1/models", include_in_schema=False)
    @app.get("/v1/models/{model_id}", include_in_schema=False)
    async def models(request: Request, model_id: str | None = None) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        protocol = protocol_for_headers(headers) or anthropic
        try:
            tenant = await anyio.to_thread.run_sync(gate.tenant, headers)
        except AuthError as exc:
            return _refuse(protocol, 401, exc.message)
        return await _models(proxy, request, headers, protocol, tenant, model_id)

    from ._api import api_router
    from ._web_api import web_router

    app.include_router(api_router(gate))
    app.include_router(web_router(gate, web))
    if config.dashboard:
        static = resources.files("comal.serve").joinpath("static")

        @app.get("/", include_in_schema=False)
        async def dashboard() -> Response:
            return FileResponse(str(static.joinpath("index.html")), headers=_PAGE_HEADERS)

        @app.get("/docs", include_in_schema=False)
        async def docs() -> Response:
            return RedirectResponse("/#/api")

        # Browsers ask for /favicon.ico whatever the page links: the page's icon, not a 404.
        @app.get("/favicon.ico", include_in_schema=False)
        async def favicon() -> Response:
            icon = str(static.joinpath("favicon.svg"))
            return FileResponse(icon, media_type="image/svg+xml", headers=_PAGE_HEADERS)

        @app.get("/static/{name}", include_in_schema=False)
        async def asset(name: str) -> Response:
            target = static.joinpath(name)
            if "/" in name or not target.is_file():
                return JSONResponse({"error": {"code": "NOT_FOUND", "message": name}}, 404)
            return FileResponse(str(target), headers=_PAGE_HEADERS)

    return app


async def _count(
    proxy: ProxyService,
    led: LedgerBackend,
    anthropic: WireProtocol,
    raw: bytes,
    headers: dict[str, str],
    query: str,
    tenant: Tenant,
) -> Response:
    """Anthropic token counting: the upstream's count when it answers, else comal's own. The
    body is read first: what comal refuses (too deep, no model) is not sent on either."""
    try:
        request = parse_request(anthropic, raw, tenant.name)
    except InputError as exc:  # a bad body is the client's error, in the provider's shape
        return _refuse(anthropic, 400, f"[{exc.code}] {exc}")
    path = "/v1/messages/count_tokens"
    forward = await proxy.passthrough(anthropic, path, query, raw, headers, tenant.consumed_header)
    if forward is not None and forward.status < 500 and forward.status != 404:
        return _send(forward)
    counter = led.counter
    total = count_messages(counter, [*request.instructions, *request.messages])
    total += counter.count(request.tools_json) if request.tools else 0
    payload: dict[str, Any] = {"input_tokens": total}
    return JSONResponse(payload, headers={"x-comal-estimated": counter.name})


async def _models(
    proxy: ProxyService,
    request: Request,
    headers: dict[str, str],
    protocol: WireProtocol,
    tenant: Tenant,
    model_id: str | None,
) -> Response:
    """The upstream's model list (or one model), else the catalog's (see :mod:`._models`)."""
    path, query = request.url.path, request.url.query
    forward = await proxy.passthrough(
        protocol, path, query, b"", headers, tenant.consumed_header, method="GET"
    )
    if forward is not None and upstream_answered(forward.status):
        return _send(forward)
    marked = {CATALOG_HEADER: "catalog"}
    if protocol.models is None or protocol.model is None:
        return _refuse(protocol, 404, f"comal has no model list for {protocol.title}")
    if model_id is None:
        return JSONResponse(catalog_models(protocol), headers=marked)
    found = catalog_model(protocol, model_id)
    if found is None:
        return _refuse(protocol, 404, f"model {model_id!r} is not in comal's catalog")
    return JSONResponse(found, headers=marked)


def _open(config: ServeConfig) -> LedgerBackend:
    if config.ledger is None:
        return open_ledger()
    if isinstance(config.ledger, str):
        return open_ledger(config.ledger)
    return open_ledger(config.ledger)
