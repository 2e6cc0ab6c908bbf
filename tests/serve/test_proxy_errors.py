"""Bad input and failing upstreams: a clear error in the provider's own shape, nothing lost or
duplicated in the ledger.

# covers: LED-1, LED-2, OUT-1, TOK-1
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from comal.messages import Opaque
from comal.messages.wire import wire_protocol
from comal.serve import INTERRUPTED_EVENT
from comal.testing._fake_wire import scripted_events

from ._support import proxy

BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "hi"}],
}


def _roles(px: Any) -> list[list[str]]:
    return [[e.role for e in px.ledger.entries(s.scope)] for s in px.ledger.sessions()]


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/messages", "anthropic"),
        ("/v1/chat/completions", "openai"),
        ("/v1/responses", "openai"),
    ],
)
def test_malformed_json_is_a_400_in_the_route_shape(tmp_path: Path, path: str, shape: str) -> None:
    with proxy(tmp_path, []) as px:
        r = httpx.post(px.url + path, content=b'{"model": "x", "messages": [', headers={})
        assert r.status_code == 400
        body = r.json()
        if shape == "anthropic":
            assert body["type"] == "error"
            assert body["error"]["type"] == "invalid_request_error"
        else:
            assert body["error"]["type"] == "invalid_request_error"
        assert "not JSON" in (body["error"]["message"])
        assert px.fake.requests == []
        assert px.ledger.sessions() == []


def test_a_block_comal_cannot_read_is_kept_whole_and_forwarded(tmp_path: Path) -> None:
    """A block type comal does not know yet must not break the client, nor be lost (LED-1):
    it is stored opaque and the upstream gets it exactly."""
    with proxy(tmp_path, [{"content": "fine"}]) as px:
        odd = {**BODY, "messages": [{"role": "user", "content": [{"type": "bogus"}]}]}
        r = httpx.post(px.url + "/v1/messages", json=odd)
        assert r.status_code == 200
        assert r.headers["x-comal-stage"] == "verbatim"
        (sent,) = px.fake.requests
        assert sent.body["messages"] == odd["messages"]
        (info,) = px.ledger.sessions()
        first = px.ledger.entries(info.scope)[0].message
        assert first.parts == (Opaque("anthropic", '{"type":"bogus"}'),)
        missing = httpx.post(px.url + "/v1/messages", json={"messages": []})
        assert missing.status_code == 400 and "model" in missing.json()["error"]["message"]


def test_oversized_body_is_413(tmp_path: Path) -> None:
    with proxy(tmp_path, [], max_body_bytes=1000) as px:
        big = {**BODY, "messages": [{"role": "user", "content": "x" * 5000}]}
        r = httpx.post(px.url + "/v1/messages", json=big)
        assert r.status_code == 413
        assert r.json()["error"]["type"] == "request_too_large"
        r = httpx.post(
            px.url + "/v1/chat/completions", json={"model": "m", "messages": [], "x": "y" * 2000}
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
        assert px.ledger.sessions() == []


def test_keys_required_once_one_exists_and_tenants_are_apart(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "a"}, {"content": "b"}]) as px:
        _, key_a = px.ledger.add_proxy_key("acme", "ci")
        _, key_b = px.ledger.add_proxy_key("globex")
        client = px.anthropic(api_key="sk", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as missing:
            client.messages.create(**BODY)  # type: ignore[call-overload]
        assert "proxy key is required" in str(missing.value)
        wrong = px.anthropic(
            api_key="sk",
            max_retries=0,
            default_headers={"x-comal-key": key_a[:-2] + "zz"},
        )
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.create(**BODY)  # type: ignore[call-overload]
        oa = px.openai(api_key="comal_0000_nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert px.fake.requests == []
        # Both tenants send the same conversation with the same session header.
        for key in (key_a, key_b):
            ok = px.anthropic(
                api_key=key,  # a comal key in the provider header is consumed, not forwarded
                max_retries=0,
                default_headers={"x-comal-session": "same"},
            )
            ok.messages.create(**BODY)  # type: ignore[call-overload]
        sent = [
            r.headers.get("authorization", "") + r.headers.get("x-api-key", "")
            for r in px.fake.requests
        ]
        assert all("comal_" not in s for s in sent)
        tenants = sorted(s.tenant for s in px.ledger.sessions())
        assert tenants == ["acme", "globex"]
        a, b = px.ledger.sessions(tenant="acme")[0], px.ledger.sessions(tenant="globex")[0]
        assert a.id != b.id
        # LED-2: the API of one tenant does not see the other's session.
        seen = httpx.get(f"{px.url}/api/sessions/{b.id}", headers={"x-comal-key": key_a})
        assert seen.status_code == 404
        mine = httpx.get(f"{px.url}/api/sessions", headers={"x-comal-key": key_a}).json()
        assert [s["id"] for s in mine["sessions"]] == [a.id]


@pytest.mark.parametrize("kind", ["rate_limit", "server"])
def test_upstream_errors_pass_through_and_a_retry_duplicates_nothing(
    tmp_path: Path, kind: str
) -> None:
    with proxy(tmp_path, [{"error": kind}, {"content": "fine"}]) as px:
        client = px.anthropic(api_key="sk", max_retries=0)
        error = anthropic.RateLimitError if kind == "rate_limit" else anthropic.InternalServerError
        with pytest.raises(error) as failed:
            client.messages.create(**BODY)  # type: ignore[call-overload]
        assert failed.value.status_code == (429 if kind == "rate_limit" else 500)
        reply = client.messages.create(**BODY)  # type: ignore[call-overload]
        assert reply.content[0].text == "fine"  # type: ignore[union-attr]
        assert _roles(px) == [["user", "assistant"]]
        (info,) = px.ledger.sessions()
        records = px.ledger.requests(info.scope)
        assert [r.meta.get("error") for r in records] == [
            429 if kind == "rate_limit" else 500,
            None,
        ]


def test_unreachable_upstream_is_502_and_a_silent_one_504(tmp_path: Path) -> None:
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))
        port = dead.getsockname()[1]
    with proxy(tmp_path, []) as px:
        object.__setattr__(px.config, "upstream_openai", f"http://127.0.0.1:{port}/v1")
        oa = px.openai(api_key="sk", max_retries=0)
        with pytest.raises(openai.APIStatusError) as failed:
            oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert failed.value.status_code == 502
        assert failed.value.body["code"] == "upstream_unreachable"  # type: ignore[index]
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        port = silent.getsockname()[1]
        with proxy(tmp_path / "t", [], upstream_timeout=0.5) as px:
            object.__setattr__(px.config, "upstream_anthropic", f"http://127.0.0.1:{port}")
            client = px.anthropic(api_key="sk", max_retries=0)
            with pytest.raises(anthropic.APIStatusError) as slow:
                client.messages.create(**BODY)  # type: ignore[call-overload]
            assert slow.value.status_code == 504
            assert _roles(px) == [["user"]]


class _Broken(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        entry = {"content": "a long answer " * 20}
        events = list(scripted_events(wire_protocol("anthropic"), entry, "r1", "m", 4))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in events[: len(events) // 2]:
            self.wfile.write(event)
        self.wfile.flush()
        self.close_connection = True


@contextmanager
def _broken_upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_stream_broken_upstream_is_an_interrupted_event_not_a_half_message(
    tmp_path: Path,
) -> None:
    with _broken_upstream() as url, proxy(tmp_path, []) as px:
        object.__setattr__(px.config, "upstream_anthropic", url)
        client = px.anthropic(api_key="sk", max_retries=0)
        with pytest.raises((anthropic.APIError, httpx.HTTPError)):
            with client.messages.stream(**BODY) as stream:  # type: ignore[arg-type]
                stream.get_final_text()
        (info,) = px.ledger.sessions()
        # The proxy records the event as its stream handler ends, which may be just after the
        # client has seen the broken stream: wait for it (bounded), then count.
        for _ in range(200):
            if px.ledger.records(info.scope, "event", kinds=(INTERRUPTED_EVENT,)):
                break
            threading.Event().wait(0.05)
        events = px.ledger.records(info.scope, "event", kinds=(INTERRUPTED_EVENT,))
        assert len(events) == 1
        assert events[0].body["events"] > 0
        assert _roles(px) == [["user"]]


def test_a_client_that_leaves_mid_stream_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    long = {"content": "word " * 40_000}
    with proxy(tmp_path, [long, {"content": "short"}]) as px:
        px.fake.chunk = 1
        body = {**BODY, "stream": True}
        with httpx.stream("POST", px.url + "/v1/messages", json=body) as r:
            for _ in r.iter_bytes():
                break  # read one chunk, then hang up
        deadline = 200
        (info,) = px.ledger.sessions()
        while deadline and not px.ledger.records(info.scope, "event", kinds=(INTERRUPTED_EVENT,)):
            threading.Event().wait(0.05)
            deadline -= 1
        (event,) = px.ledger.records(info.scope, "event", kinds=(INTERRUPTED_EVENT,))
        assert "client" in event.body["reason"] or "ended" in event.body["reason"]
        assert _roles(px) == [["user"]]
        px.fake.chunk = 5
        again = httpx.post(px.url + "/v1/messages", json=body)
        assert again.status_code == 200
        assert _roles(px) == [["user", "assistant"]]


def test_instructions_that_leave_no_room_send_nothing(tmp_path: Path) -> None:
    """TOK-5 through the proxy: CONTEXT_OVERHEAD, in the provider's shape, nothing upstream."""
    # covers: TOK-5
    with proxy(tmp_path, [{"content": "never"}], context_window=2_000) as px:
        huge = {**BODY, "system": "rules " * 3000}
        r = httpx.post(px.url + "/v1/messages", json=huge)
        assert r.status_code == 400
        assert "CONTEXT_OVERHEAD" in r.json()["error"]["message"]
        assert px.fake.requests == []
