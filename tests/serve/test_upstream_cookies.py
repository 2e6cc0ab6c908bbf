"""The proxy's one upstream client serves every tenant: a cookie an upstream sets in its reply to
one tenant's request must never go up with another's (nor with the same tenant's next one: the
client's own SDK keeps its cookies, the proxy keeps none)."""

# covers: LED-2

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson

from comal.ledger import open_ledger
from comal.messages.wire import wire_protocol
from comal.serve import ServeConfig
from comal.serve._proxy import ProxyService


def _reply(request: httpx.Request) -> httpx.Response:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    headers = {"content-type": "application/json", "set-cookie": "seen=tenant-a; Path=/"}
    return httpx.Response(200, content=orjson.dumps(body), headers=headers)


async def _two_tenants(tmp_path: Path) -> list[httpx.Request]:
    sent: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return _reply(request)

    led = open_ledger(tmp_path / "l.db")
    config = ServeConfig(upstream_anthropic="https://api.anthropic.test")
    service = ProxyService(config, led, transport=httpx.MockTransport(upstream))
    try:
        for n, tenant in enumerate(("a", "b", "a")):
            raw = orjson.dumps(
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": f"hello {n} from {tenant}"}],
                }
            )
            headers = {"x-api-key": "k", "x-comal-session": f"s-{n}"}
            forward = await service.handle(
                wire_protocol("anthropic"), "/v1/messages", "", raw, headers, tenant, None
            )
            assert forward.status == 200
    finally:
        await service.aclose()
        led.close()
    return sent


def test_an_upstream_cookie_goes_up_with_no_later_request(tmp_path: Path) -> None:
    sent = asyncio.run(_two_tenants(tmp_path))
    assert len(sent) == 3
    assert [r.headers.get("cookie") for r in sent] == [None, None, None]
