"""Issue 18, `comal serve` and browsers: DNS rebinding, cross-origin pages, keyless binds.

A keyless loopback server answered any ``Host``: a page on ``attacker.example`` that re-points
its name at 127.0.0.1 read ``/api/sessions`` as its own origin. Any web page could POST a
``text/plain`` body (no CORS preflight) to ``/v1/messages``, which the proxy recorded and sent
upstream with the user's own key. ``--host ''`` listens on every interface yet counted as
loopback, so it served the API without a key. Each attack is mounted here, from a real
chromium where a browser is what mounts it, and must be refused on every route while the
official SDKs (which send no ``Origin``) keep working.
"""

# covers: LED-2, CFG-2, INT-2

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.ledger import open_ledger
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread, free_port
from serve._support import proxy

from ._serve_support import BODY, chromium

EVIL = "attacker.example"
_LOCAL_NETWORK_CHECKS = ",".join(
    [
        "LocalNetworkAccessChecks",
        "PrivateNetworkAccessSendPreflights",
        "PrivateNetworkAccessRespectPreflightResults",
        "BlockInsecurePrivateNetworkRequests",
    ]
)
ROUTES = [
    ("GET", "/api/sessions"),
    ("GET", "/"),
    ("GET", "/openapi.json"),
    ("POST", "/v1/messages"),
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages/count_tokens"),
]


def _send(url: str, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = json.dumps(BODY) if method == "POST" else None
    return httpx.request(method, url + path, content=body, headers=headers)


def _error_code(r: httpx.Response) -> str:
    error = r.json()["error"]
    return f"{error.get('code')} {error.get('message')}"


def test_a_foreign_host_name_is_refused_on_every_route(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "hello"}]) as px:
        px.anthropic().messages.create(**BODY)  # a session a rebinding page would read
        port = px.server.port
        for method, path in ROUTES:
            for host in (EVIL, f"{EVIL}:{port}", "127.0.0.1.attacker.example", "[::2]:1"):
                r = _send(px.url, method, path, {"host": host})
                assert r.status_code == 400, (path, host, r.status_code)
                assert "HOST_NOT_ALLOWED" in _error_code(r), (path, r.text)
                assert "hello" not in r.text
        assert len(px.fake.requests) == 1 and len(px.ledger.sessions()) == 1
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "[::1]:8787"):
            assert _send(px.url, "GET", "/api/sessions", {"host": host}).status_code == 200
        # The proxy routes answer in the provider's own shape (an SDK raises its typed error).
        r = _send(px.url, "POST", "/v1/messages", {"host": EVIL})
        assert r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "invalid_request_error"


def test_a_rebinding_page_in_chromium_reads_nothing(tmp_path: Path) -> None:
    """The rebinding itself: chromium resolves attacker.example to 127.0.0.1, so a page of that
    origin is served by comal and its same-origin reads reach the API."""
    with proxy(tmp_path, [{"content": "secret reply"}]) as px:
        px.anthropic().messages.create(**BODY)
        (session,) = px.ledger.sessions()
        rules = f"--host-resolver-rules=MAP {EVIL} 127.0.0.1"
        with chromium(rules) as browser:
            page = browser.new_page()
            page.goto(f"http://{EVIL}:{px.server.port}/api/sessions")
            body = page.inner_text("body")
            assert session.id not in body and "HOST_NOT_ALLOWED" in body
            page.goto(f"http://{EVIL}:{px.server.port}/")
            assert page.locator("#sessions").count() == 0
            # The same browser, at the server's own address, still has the dashboard.
            page.goto(px.url + "/")
            page.wait_for_selector("#sessions tbody tr.click")
            assert session.id[:8] in page.inner_text("#sessions")


def test_a_cross_origin_page_cannot_post_to_the_proxy(tmp_path: Path) -> None:
    """A page on another origin POSTs text/plain (a "simple" request, no preflight): mounted
    from chromium and with the headers a browser sends, on every route."""
    with proxy(tmp_path, [{"content": "spent"}, {"content": "ok"}]) as px:
        attack = (
            f"fetch({json.dumps(px.url + '/v1/messages')}, {{method: 'POST', mode: 'no-cors', "
            f"headers: {{'content-type': 'text/plain'}}, body: {json.dumps(json.dumps(BODY))}}})"
            ".then(() => 'sent', (e) => String(e))"
        )
        # Chromium itself now stops public pages reaching local addresses (Local Network
        # Access); Firefox and Safari do not, and neither does an older chromium: as they do.
        with chromium(f"--disable-features={_LOCAL_NETWORK_CHECKS}") as browser:
            page = browser.new_page()
            page.route(
                f"http://{EVIL}/**",
                lambda route: route.fulfill(body="<p>cute cats</p>", content_type="text/html"),
            )
            page.goto(f"http://{EVIL}/")
            assert page.evaluate(attack) == "sent"  # the browser did send it
        assert px.fake.requests == [] and px.ledger.sessions() == []
        browserish = {
            "origin": f"http://{EVIL}",
            "sec-fetch-site": "cross-site",
            "sec-fetch-mode": "no-cors",
            "content-type": "text/plain",
        }
        for method, path in [*ROUTES, ("POST", "/api/approvals/s/r")]:
            r = _send(px.url, method, path, browserish)
            assert r.status_code == 403, (path, r.status_code, r.text)
            assert "ORIGIN_NOT_ALLOWED" in _error_code(r)
        # No Origin but a cross-site fetch (an <img>, a <script>, a no-cors GET): refused too.
        fetched = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"}
        assert _send(px.url, "GET", "/api/sessions", fetched).status_code == 403
        assert px.fake.requests == [] and px.ledger.sessions() == []
        # Real clients send no Origin: the official SDK still gets its answer.
        assert px.anthropic().messages.create(**BODY).content[0].text == "spent"  # type: ignore[union-attr]
        # The dashboard's own (same-origin) requests, and a link that opens it, pass.
        own = {"origin": px.url, "sec-fetch-site": "same-origin"}
        assert _send(px.url, "GET", "/api/sessions", own).status_code == 200
        link = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
        assert _send(px.url, "GET", "/", link | {"sec-fetch-dest": "document"}).status_code == 200
        framed = link | {"sec-fetch-dest": "iframe"}
        assert _send(px.url, "GET", "/", framed).status_code == 403


def test_the_operator_extends_the_allow_lists(tmp_path: Path) -> None:
    """CFG-2: only the operator's settings (the serve section or flags) widen the lists."""
    settings: dict[str, Any] = {
        "allowed_hosts": ("comal.internal", "*.corp.example"),
        "allowed_origins": ("https://ops.example",),
    }
    with proxy(tmp_path, [{"content": "a"}, {"content": "b"}], **settings) as px:
        for host in ("comal.internal", "box.corp.example:8787"):
            assert _send(px.url, "GET", "/api/sessions", {"host": host}).status_code == 200
        assert _send(px.url, "GET", "/api/sessions", {"host": "corp.example"}).status_code == 400
        ops = {"origin": "https://ops.example", "sec-fetch-site": "cross-site"}
        assert _send(px.url, "POST", "/v1/messages", ops).status_code == 200
        other = {"origin": "https://ops.example.evil", "sec-fetch-site": "cross-site"}
        assert _send(px.url, "POST", "/v1/messages", other).status_code == 403
        assert len(px.fake.requests) == 1


def test_flags_and_the_configuration_file_reach_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from comal.cli import app

    seen: dict[str, Any] = {}

    def serve_forever(app: Any, *args: Any, sock: Any = None, **kw: Any) -> None:
        sock.close()  # the port the command bound before its banner
        seen.setdefault("config", app.state.config)
        app.state.ledger.close()

    monkeypatch.setattr("comal.serve._run.serve_forever", serve_forever)
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"serve": {"allowed_hosts": ["from.file"], "body_timeout": 9}}))
    args = ["serve", "--config", str(conf), "--ledger", str(tmp_path / "l.db")]
    args += ["--port", str(free_port())]
    args += ["--allow-host", "comal.internal", "--allow-origin", "https://ops.example"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config: ServeConfig = seen["config"]
    assert config.allowed_hosts == ("from.file", "comal.internal")
    assert config.allowed_origins == ("https://ops.example",)
    assert config.body_timeout == 9
    bad = CliRunner().invoke(app, [*args[:5], "--allow-origin", "ops.example/x"])
    assert bad.exit_code != 0 and "--allow-origin" in bad.output


def test_only_an_explicit_loopback_address_runs_keyless(tmp_path: Path) -> None:
    """``--host ''`` listens on every interface: it must not count as loopback."""
    led = open_ledger(tmp_path / "ledger.db")
    scope = led.create_session("local", "coder")
    for host in ("", "0.0.0.0", "::", "192.0.2.7"):
        config = ServeConfig(host=host, upstream_anthropic="http://127.0.0.1:9")
        with ServerThread(create_app(config, ledger=led)) as server:
            r = httpx.get(server.url + "/api/sessions")
            assert r.status_code == 401 and scope.session not in r.text, host
            r = httpx.post(server.url + "/v1/messages", json=BODY)
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        assert not config.loopback
    led.close()
    for loopback in ("127.0.0.1", "::1", "127.0.0.2", "localhost"):
        assert ServeConfig(host=loopback).loopback
