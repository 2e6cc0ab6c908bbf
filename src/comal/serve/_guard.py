"""Who may reach the server at all: the name a request is addressed to and the page it came from.

Two browser attacks reach a server on 127.0.0.1 that answers without a key:

- **DNS rebinding.** A page on ``attacker.example`` re-points its own name at 127.0.0.1; the
  browser then treats the server as same-origin with the attacker's page, but every request
  still names ``Host: attacker.example``. So the server answers only to the names it knows:
  the loopback names, the address it listens on, this machine's name and the operator's
  ``allowed_hosts``. Anything else is refused with 400 before any route runs.
- **Cross-origin requests.** Any page may POST a ``text/plain`` body to a local port (no CORS
  preflight for that), which the proxy would record and forward with the user's key. Browsers
  say where a request comes from: ``Origin`` on every cross-origin request and every POST, and
  ``Sec-Fetch-Site`` on every request. A request from another origin than the server's own is
  refused with 403 unless the operator allowed that origin; the one exception is a top-level
  navigation to the dashboard page (a link to it), which gives the linking page nothing.

Non-browser clients — the official SDKs, Claude Code, Codex, curl — send neither header and
are not affected. A comal key in a URL's query string is refused on every route too: URLs end
up in logs and histories, and the proxy forwards its query string upstream. Refusals on the
proxy routes are in the route's provider error shape.

Starlette's ``TrustedHostMiddleware`` is not used: it answers in plain text, and it splits
``Host`` on the first colon, which refuses every bracketed IPv6 name (``[::1]:8787``).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ._config import ServeConfig
from ._errors import HostNotAllowed, OriginNotAllowed, RequestRefused
from ._upstream import check_query, refusal

__all__ = ["Guard", "allowed_host_names"]

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD = ("", "0.0.0.0", "::")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# The page a link may open; everything else is for the dashboard's own scripts and clients.
_NAVIGABLE = frozenset({"/"})


def allowed_host_names(config: ServeConfig) -> tuple[str, ...]:
    """The names (lower case, IPv6 without brackets) a request's ``Host`` may carry."""
    names = list(_LOOPBACK_NAMES)
    bound = config.host.strip("[]").lower()
    if bound not in _WILDCARD:
        names.append(bound)
    try:
        names.append(socket.gethostname().lower())
    except OSError:
        pass
    names += [h.strip("[]").lower() for h in config.allowed_hosts]
    return tuple(dict.fromkeys(n for n in names if n))


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(hostname, port)`` of a ``Host`` header or an origin's netloc; ``None`` if malformed."""
    if not value or any(c in value for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit("//" + value)
        port = parts.port
    except ValueError:
        return None
    name = parts.hostname
    if not name:
        return None
    if value.startswith("["):
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return None
    return name, port


def _host_allowed(name: str, allowed: Iterable[str]) -> bool:
    for pattern in allowed:
        if pattern == "*" or name == pattern:
            return True
        if pattern.startswith("*.") and fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def _origin_key(origin: str) -> tuple[str, str, int | None] | None:
    parts = urlsplit(origin)
    if parts.scheme not in _DEFAULT_PORTS or parts.path not in ("", "/"):
        return None
    found = _split_host(parts.netloc)
    if found is None:
        return None
    name, port = found
    if port == _DEFAULT_PORTS[parts.scheme]:
        port = None
    return parts.scheme, name, port


def _same(key: tuple[str, str, int | None], here: tuple[str, int | None] | None) -> bool:
    """Whether an origin is the server itself, as the browser addressed it (the Host header;
    behind a TLS terminator the page is https while this hop is http, so schemes differ)."""
    if here is None:
        return False
    name, port = here
    if port == _DEFAULT_PORTS[key[0]]:
        port = None
    return (key[1], key[2]) == (name.lower(), port)


class Guard:
    """ASGI middleware: refuses unknown ``Host`` names and cross-origin browser requests on
    every route, before anything else runs (see the module docstring)."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.hosts = allowed_host_names(config)
        keys = (_origin_key(o) for o in config.allowed_origins)
        self.origins = frozenset(k for k in keys if k is not None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan; uvicorn runs with websockets off
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            self.check(scope.get("method", "GET"), scope["path"], headers)
            check_query(scope.get("query_string", b"").decode("latin-1"))
        except RequestRefused as exc:
            await refusal(scope["path"], exc)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, method: str, path: str, headers: Mapping[str, str]) -> None:
        host = headers.get("host")
        here: tuple[str, int | None] | None = None
        if host is not None:
            here = _split_host(host.strip())
            if here is None or not _host_allowed(here[0].lower(), self.hosts):
                raise HostNotAllowed(
                    f"this server does not answer to the host name {host!r} (a guard against "
                    "DNS rebinding): only to its loopback names, its listening address, this "
                    "machine's name and the names an operator adds with `comal serve "
                    "--allow-host NAME` or serve.allowed_hosts"
                )
        origin = headers.get("origin")
        if origin is not None:
            key = _origin_key(origin.strip())
            if key is not None and (key in self.origins or _same(key, here)):
                return
            raise OriginNotAllowed(
                f"a request from the web page {origin!r} is refused: only this server's own "
                "pages may call it from a browser. An operator allows another origin with "
                "`comal serve --allow-origin ORIGIN` or serve.allowed_origins"
            )
        site = headers.get("sec-fetch-site")
        if site is None or site in ("same-origin", "none"):
            return
        navigation = headers.get("sec-fetch-mode") == "navigate"
        document = headers.get("sec-fetch-dest") == "document"
        if method in ("GET", "HEAD") and navigation and document and path in _NAVIGABLE:
            return
        raise OriginNotAllowed(
            f"a {site} browser request is refused: only this server's own pages may call it "
            "from a browser; open the dashboard at its own address"
        )
