"""Issue 18: comal's own credentials never leave comal, wherever a client put them.

A proxy key in the query string (``/v1/messages?key=comal_…``) went upstream inside the URL.
A client that sends its key twice — the ``x-comal-key`` header and its provider key header, as a
wrapper setting both does — had the second copy forwarded, since only the header the key was
read from was dropped. The upstream is a third party: it must never see a comal key.
"""

# covers: INT-2

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from serve._support import proxy

from ._serve_support import BODY

LOOKS_LIKE_A_KEY = "comal_0123456789ab_Zm9yZ2VkLWJ1dC1zaGFwZWQtbGlrZS1hLWtleQ"


def _leaks(requests: list[Any], secret: str) -> list[str]:
    return [r.path for r in requests if secret in r.path or secret in json.dumps(r.headers)]


def test_a_key_in_the_url_is_refused_and_never_forwarded(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "a"}, {"content": "b"}]) as px:
        # A keyless loopback server used to serve this and send the URL on as it came.
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            r = httpx.post(f"{px.url}{path}?beta=true&key={LOOKS_LIKE_A_KEY}", json=BODY)
            assert r.status_code == 400, (path, r.text)
            assert r.json()["error"]["type"] == "invalid_request_error"
            assert "KEY_IN_URL" in r.json()["error"]["message"]
        for path in ("/v1/chat/completions", "/v1/responses"):
            r = httpx.post(f"{px.url}{path}?api_key={LOOKS_LIKE_A_KEY}", json=BODY)
            assert r.status_code == 400 and "KEY_IN_URL" in r.json()["error"]["message"]
        assert px.fake.requests == [] and px.ledger.sessions() == []
        # The API (the old dashboard sent its key as ?key= for live events) refuses it too.
        _, key = px.ledger.add_proxy_key("acme")
        r = httpx.get(f"{px.url}/api/sessions?key={key}")
        assert r.status_code == 400 and r.json()["error"]["code"] == "KEY_IN_URL"
        assert httpx.get(f"{px.url}/api/sessions", headers={"x-comal-key": key}).is_success
        # Query parameters of the provider's own pass on unchanged.
        mine = {"x-comal-key": key, "x-api-key": "sk-client"}
        assert httpx.post(f"{px.url}/v1/messages?beta=true", json=BODY, headers=mine).is_success
        (sent,) = px.fake.requests
        assert sent.path == "/v1/messages?beta=true" and _leaks(px.fake.requests, key) == []


def test_a_key_sent_twice_never_goes_upstream(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": str(n)} for n in range(4)]) as px:
        _, key = px.ledger.add_proxy_key("acme")
        both = {"x-comal-key": key}
        px.anthropic(api_key=key, default_headers=both).messages.create(**BODY)
        px.openai(api_key=key, default_headers=both).chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
        # A provider key in x-api-key and the comal key as a bearer token beside it.
        bearer = {"x-api-key": "sk-client", "authorization": f"Bearer {key}"}
        assert httpx.post(px.url + "/v1/messages", json=BODY, headers=bearer).is_success
        r = httpx.post(
            px.url + "/v1/messages",
            json=BODY,
            headers={"x-comal-key": key, "x-forwarded-key": f"token={key}"},
        )
        assert r.status_code == 200
        assert len(px.fake.requests) == 4
        assert _leaks(px.fake.requests, key) == []
        assert _leaks(px.fake.requests, "comal_") == []
        # The client's own provider key still goes upstream where it was sent.
        assert px.fake.requests[2].headers["x-api-key"] == "sk-client"
        assert {s.tenant for s in px.ledger.sessions()} == {"acme"}
