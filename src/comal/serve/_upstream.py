"""The wire edges of the proxy: upstream URLs and headers, provider-shaped errors, the tee.

Errors the proxy itself produces (bad JSON, a missing key, an unreachable upstream) are written
in the shape of the route's protocol (:attr:`~comal.messages.wire.WireProtocol.error`), so an
SDK raises its own typed error for them. Errors the upstream sends are passed through unchanged.

A protocol goes to one of the configured upstreams (its ``upstream``): ``anthropic``
(``--upstream-anthropic``, a base URL the route's path is appended to) or ``openai``
(``--upstream-openai``, a base URL that ends in ``/v1`` as the SDKs' do), with the operator's
key for that upstream in the header the protocol names.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from urllib.parse import parse_qsl

import httpx
from starlette.responses import JSONResponse, Response

from ..ledger import PROXY_KEY_PREFIX as KEY_PREFIX
from ..messages.wire import WireProtocol, protocol_for_path
from ._config import ServeConfig
from ._errors import KeyInURL, RequestRefused

__all__ = [
    "Tee",
    "carries_key",
    "check_query",
    "error_body",
    "proxy_key_of",
    "refusal",
    "response_headers",
    "upstream_headers",
    "upstream_url",
]

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


def error_body(protocol: WireProtocol, status: int, message: str) -> bytes:
    """``message`` as the route's protocol shapes an error with ``status``."""
    return json.dumps(protocol.error(status, message), ensure_ascii=False).encode()


def refusal(path: str, exc: RequestRefused) -> Response:
    """``exc`` as the client of ``path`` reads errors; the connection is not reused."""
    headers = {"connection": "close", "x-should-retry": "false"}
    protocol = protocol_for_path(path)
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


# An upstream: the configured base URL and key of its routes, and the part of a route's path
# its base URL already ends in.
_UPSTREAMS = {
    "anthropic": ("upstream_anthropic", "upstream_anthropic_key", ""),
    "openai": ("upstream_openai", "upstream_openai_key", "/v1"),
}


def _upstream(config: ServeConfig, protocol: WireProtocol) -> tuple[str, str | None, str]:
    base, key, prefix = _UPSTREAMS[protocol.upstream]
    return getattr(config, base), getattr(config, key), prefix


def upstream_url(config: ServeConfig, protocol: WireProtocol, path: str, query: str) -> str:
    base, _, prefix = _upstream(config, protocol)
    url = base.rstrip("/") + path.removeprefix(prefix)
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
    config: ServeConfig, protocol: WireProtocol, headers: Mapping[str, str], consumed: str | None
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
    key = _upstream(config, protocol)[1]
    if key is not None:
        out.pop("x-api-key", None)
        out.pop("authorization", None)
        header, before = protocol.auth
        out[header] = before + key
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
