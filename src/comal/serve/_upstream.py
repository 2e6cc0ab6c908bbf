"""The wire edges of the proxy: upstream URLs and headers, provider-shaped errors, the tee.

Errors the proxy itself produces (bad JSON, a missing key, an unreachable upstream) are written
in the shape of the route's provider, so an SDK raises its own typed error for them: Anthropic
``{"type": "error", "error": {"type", "message"}}``, OpenAI ``{"error": {"message", "type",
"param", "code"}}``. Errors the upstream sends are passed through unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.responses import JSONResponse, Response

from ..ledger import PROXY_KEY_PREFIX as KEY_PREFIX
from ._config import ServeConfig
from ._errors import KeyInURL, RequestRefused
from ._wire import Protocol

__all__ = [
    "PROXY_ROUTES",
    "Tee",
    "carries_key",
    "check_query",
    "error_body",
    "protocol_of",
    "proxy_key_of",
    "refusal",
    "response_headers",
    "stream_error",
    "upstream_headers",
    "upstream_url",
]

PROXY_ROUTES: dict[str, Protocol] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "openai_chat",
    "/v1/responses": "openai_responses",
}

# A comal proxy key anywhere in a value (a header, a query parameter): such a value never goes
# upstream, whichever header or parameter carried it.
_KEY = re.compile(r"(?<![A-Za-z0-9])" + re.escape(KEY_PREFIX))

# Not forwarded in either direction: they describe one hop, not the message.
_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        "content-encoding",
    }
)

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    500: ("server_error", None),
    502: ("server_error", "upstream_unreachable"),
    504: ("server_error", "upstream_timeout"),
}


def error_body(protocol: Protocol, status: int, message: str) -> bytes:
    """``message`` as the route's provider would shape an error with ``status``."""
    payload: dict[str, Any]
    if protocol == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        payload = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind, code = _OPENAI_TYPES.get(status, ("server_error", None))
        payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(payload, ensure_ascii=False).encode()


def protocol_of(path: str) -> Protocol | None:
    """The provider whose error shape a path's clients read (``None``: comal's own API)."""
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/"):
        return PROXY_ROUTES.get(path, "openai_chat")
    return None


def refusal(path: str, exc: RequestRefused) -> Response:
    """``exc`` as the client of ``path`` reads errors; the connection is not reused."""
    headers = {"connection": "close", "x-should-retry": "false"}
    protocol = protocol_of(path)
    if protocol is None:
        payload = {"error": {"code": exc.code, "message": str(exc)}}
        return JSONResponse(payload, exc.status, headers)
    body = error_body(protocol, exc.status, f"[{exc.code}] {exc}")
    return Response(body, exc.status, headers, "application/json")


def carries_key(value: str) -> bool:
    """Whether ``value`` holds a comal proxy key (or something shaped like one)."""
    return _KEY.search(value) is not None


def check_query(query: str) -> None:
    """Refuse a comal key in a URL's query string: it would reach the upstream, access logs
    and browser histories; clients send it in a header."""
    for name, value in parse_qsl(query, keep_blank_values=True):
        if carries_key(name) or carries_key(value):
            raise KeyInURL(
                f"the query parameter {name!r} holds a comal proxy key, which is never accepted "
                "in a URL; send it as the x-comal-key header (or as the API key)"
            )


def stream_error(protocol: Protocol, message: str) -> bytes:
    """An error event that ends a broken stream, as each provider sends one mid-stream."""
    if protocol == "anthropic":
        data = {"type": "error", "error": {"type": "api_error", "message": message}}
        return f"event: error\ndata: {json.dumps(data)}\n\n".encode()
    if protocol == "openai_chat":
        data = {"error": {"message": message, "type": "server_error", "code": "stream_broken"}}
        return f"data: {json.dumps(data)}\n\n".encode()
    event = {"type": "error", "code": "stream_broken", "message": message, "param": None}
    return f"event: error\ndata: {json.dumps(event)}\n\n".encode()


def upstream_url(config: ServeConfig, protocol: Protocol, path: str, query: str) -> str:
    if protocol == "anthropic":
        url = config.upstream_anthropic.rstrip("/") + path
    else:
        # OpenAI base URLs end in /v1, as the SDKs' do; the route path starts with it.
        url = config.upstream_openai.rstrip("/") + path.removeprefix("/v1")
    return f"{url}?{query}" if query else url


def proxy_key_of(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """``(key, header)``: a comal proxy key the client sent, and in which header.

    ``x-comal-key`` is the proxy's own header; a client that can only send its provider key
    header (``x-api-key``, ``authorization: Bearer``) may put a ``comal_`` key there instead.
    """
    if headers.get("x-comal-key"):
        return headers["x-comal-key"], "x-comal-key"
    api = headers.get("x-api-key", "")
    if api.startswith(KEY_PREFIX):
        return api, "x-api-key"
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer ") and auth[7:].strip().startswith(KEY_PREFIX):
        return auth[7:].strip(), "authorization"
    return None, None


def upstream_headers(
    config: ServeConfig, protocol: Protocol, headers: Mapping[str, str], consumed: str | None
) -> dict[str, str]:
    """The client's headers as they go upstream: its own key passes through unless the
    operator configured one. comal's own credentials never do: the header the proxy key came
    in, and every other header holding one (a client may send its key twice)."""
    out = {
        k: v
        for k, v in headers.items()
        if k not in _HOP and not k.startswith("x-comal-") and k != consumed and not carries_key(v)
    }
    out["accept-encoding"] = "identity"  # the tee reads what it forwards
    key = config.upstream_anthropic_key if protocol == "anthropic" else config.upstream_openai_key
    if key is not None:
        out.pop("x-api-key", None)
        out.pop("authorization", None)
        if protocol == "anthropic":
            out["x-api-key"] = key
        else:
            out["authorization"] = f"Bearer {key}"
    out.update(config.extra_headers)
    return out


def response_headers(upstream: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in upstream.items() if k.lower() not in _HOP}


class Tee(httpx.AsyncByteStream):
    """An upstream body read once: each chunk goes to ``sink`` as the parser receives it."""

    def __init__(self, source: AsyncIterator[bytes], sink: Callable[[bytes], None]) -> None:
        self._source = source
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._source:
            self._sink(chunk)
            yield chunk
