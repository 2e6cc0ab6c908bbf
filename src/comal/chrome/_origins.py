"""Origins: where the browser may go, and the request interception that holds it there.

Every request of the browser context — navigations, sub-resources, frames, pages opened by
``window.open``, a page's own ``fetch`` — passes :meth:`Interceptor.route`. A request to
another origin is aborted before it leaves. Redirects are followed here, hop by hop, each hop
checked: Playwright does not call a route again for the hops of a redirect the browser follows,
so letting the browser follow one would let it leave unseen. A navigation that redirects within
the allowed origins becomes a fresh navigation to the next hop (intercepted again), so the
page's address stays true.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

from ._errors import ChromeConfigError

__all__ = ["LOOPBACK", "Interceptor", "Origins", "Refusal", "origin_of"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_HOPS = 10
# Pages the browser makes itself; they fetch nothing.
_LOCAL = ("about:", "data:", "blob:")


def origin_of(url: str) -> str:
    """``scheme://host:port`` with the default port written out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _PORTS or not parts.hostname:
        raise ChromeConfigError(
            f"{url!r} is not an http(s) or ws(s) URL with a host; write an origin like "
            "http://127.0.0.1:8000"
        )
    try:
        port = parts.port or _PORTS[scheme]
    except ValueError as exc:
        raise ChromeConfigError(f"{url!r} has a bad port; fix it") from exc
    host = parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    # ws(s) follows the page's origin rules: ws: is http:'s, wss: is https:'s.
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return f"{scheme}://{host}:{port}"


@dataclass(frozen=True, slots=True)
class Origins:
    exact: frozenset[str]
    loopback: bool

    @classmethod
    def of(cls, items: Iterable[str]) -> Origins:
        listed = list(items)
        exact = frozenset(origin_of(i) for i in listed if i != "loopback")
        return cls(exact, "loopback" in listed)

    def allows(self, url: str) -> bool:
        try:
            origin = origin_of(url)
        except ChromeConfigError:
            return False
        if origin in self.exact:
            return True
        host = urlsplit(url).hostname or ""
        return self.loopback and host.lower() in LOOPBACK

    def describe(self) -> list[str]:
        return sorted(self.exact) + (["loopback"] if self.loopback else [])


@dataclass(frozen=True, slots=True)
class Refusal:
    url: str
    why: str
    # The page's own navigation (its main frame), not a sub-resource, frame or popup.
    page: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "why": self.why, "page": self.page}


@dataclass
class Interceptor:
    """The context's route handler; it keeps the refusals each operation reports."""

    origins: Origins
    refused: list[Refusal] = field(default_factory=list)
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def drain(self) -> list[Refusal]:
        with self._lock:
            out, self.refused = self.refused, []
        return out

    def refuse(self, url: str, why: str, request: Any = None) -> None:
        with self._lock:
            self.refused.append(Refusal(url, why, _main_navigation(request)))

    def route(self, route: Any) -> None:
        request = route.request
        url = str(request.url)
        if url.startswith(_LOCAL):
            route.continue_()
            return
        if not self.origins.allows(url):
            self.refuse(url, f"{request.resource_type} to an origin not allowed", request)
            route.abort("blockedbyclient")
            return
        self.requests += 1
        self._follow(route, request, url)

    def _follow(self, route: Any, request: Any, url: str) -> None:
        hop, method = url, str(request.method)
        for _ in range(_MAX_HOPS):
            get = method != str(request.method) and method == "GET"
            response = route.fetch(
                url=hop, method=method, max_redirects=0, **({"post_data": ""} if get else {})
            )
            location = response.headers.get("location")
            if response.status not in _REDIRECTS or not location:
                route.fulfill(response=response)
                return
            nxt = urljoin(hop, location)
            if not self.origins.allows(nxt):
                self.refuse(nxt, f"redirect from {hop} to an origin not allowed", request)
                route.fulfill(
                    status=403,
                    content_type="text/plain",
                    body=f"refused by comal: the redirect to {nxt} leaves the allowed origins",
                )
                return
            if request.is_navigation_request():
                # The browser would follow a fulfilled redirect without asking the route again.
                route.fulfill(status=200, content_type="text/html", body=_renavigate(nxt))
                return
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method = "GET"
            hop = nxt
        self.refuse(hop, f"more than {_MAX_HOPS} redirects", request)
        route.abort("blockedbyclient")


def _main_navigation(request: Any) -> bool:
    if request is None or not request.is_navigation_request():
        return False
    try:
        frame = request.frame
        return bool(frame.parent_frame is None and frame.page.main_frame == frame)
    except Exception:  # a popup's first request has no page yet: not this page's navigation
        return False


def _renavigate(url: str) -> str:
    quoted = url.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    script = url.replace("\\", "\\\\").replace('"', '\\"').replace("<", "\\u003c")
    return (
        f'<!doctype html><html data-comal-hop><meta http-equiv="refresh" content="0;url={quoted}">'
        f'<script>location.replace("{script}")</script>'
    )
