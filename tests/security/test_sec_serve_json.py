"""Issue 18: JSON nested 1,000 levels deep crashed the proxy.

``parse_request`` read bodies with the standard library, which recurses once per level: a body
nested 1,000+ deep — in message content or in metadata — raised ``RecursionError`` and the
client got a 500 (a traceback in the server's log). The depth is now bounded while parsing and
such a body is a 400 in the route's provider shape, quickly, whatever its depth, and nothing of
it is stored or sent on (token counting included).
"""

# covers: INT-2

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from serve._support import proxy

from ._serve_support import BODY

GENEROUS = 10.0  # seconds for a refusal: a crash or a runaway parse shows, not the speed


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _bodies(depth: int) -> list[tuple[str, str]]:
    deep = _nested(depth)
    text = '{"type": "text", "text": "hi", "extra": ' + deep + "}"
    user = '{"role": "user", "content": [' + text + "]}"
    chat = '{"role": "user", "content": "hi", "name": ' + deep + "}"
    return [
        ("/v1/messages", '{"model": "m", "max_tokens": 5, "messages": [' + user + "]}"),
        (
            "/v1/messages",
            '{"model": "m", "max_tokens": 5, "messages": [], "metadata": ' + deep + "}",
        ),
        ("/v1/messages/count_tokens", '{"model": "m", "messages": [' + user + "]}"),
        ("/v1/chat/completions", '{"model": "m", "messages": [' + chat + "]}"),
        ("/v1/responses", '{"model": "m", "input": "hi", "metadata": {"a": ' + deep + "}}"),
    ]


def _shape(path: str, r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    if path.startswith("/v1/messages"):
        assert body["type"] == "error"
    return dict(body["error"])


def test_deeply_nested_json_is_a_400_in_the_provider_shape(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "fine"}], max_body_bytes=8 << 20) as px:
        for depth in (1_000, 5_000, 1_000_000):
            for path, raw in _bodies(depth):
                started = time.monotonic()
                r = httpx.post(px.url + path, content=raw, timeout=GENEROUS)
                assert time.monotonic() - started < GENEROUS
                assert r.status_code == 400, (path, depth, r.status_code, r.text[:200])
                error = _shape(path, r)
                assert error["type"] == "invalid_request_error"
                assert "JSON_TOO_DEEP" in error["message"]
        assert px.fake.requests == [] and px.ledger.sessions() == []
        # Nesting that real requests use still goes through.
        schema: dict[str, Any] = {"type": "object"}
        for _ in range(30):
            schema = {"type": "object", "properties": {"x": schema}}
        tools = [{"name": "t", "description": "d", "input_schema": schema}]
        ok = httpx.post(px.url + "/v1/messages", content=json.dumps({**BODY, "tools": tools}))
        assert ok.status_code == 200 and len(px.fake.requests) == 1
