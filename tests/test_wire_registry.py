"""A new wire protocol is one module plus its registration (issue 31, item 2).

This file is that module: ``toy`` is a made-up provider API with its own route (``/v1/toy``),
its own JSON (``lines`` of ``{"by", "say"}``, a reply ``{"said", "why", "tokens"}``), its own
stream and error shapes. Registered through the plugin seam (``comal_wire_protocols``), it is
served by ``comal serve``'s proxy, answered by FakeServer and recorded in the ledger, whole and
streamed, and a retry of a reply already stored is given it again in toy's shape: nothing under
``src/`` names it. A protocol name or route registered twice is refused, naming the plugin.

# covers: PLG-1, INT-2
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.errors import InputError
from comal.ledger import open_ledger, verify
from comal.messages import Message, Role, Text
from comal.messages.wire import (
    OUTPUT_LENGTH,
    Accumulator,
    Reply,
    Stop,
    WireProtocol,
    WireReply,
    protocol_for_route,
    render_engine_part,
    sse,
    wire_protocol,
)
from comal.plugins import PluginConflict, enable_plugins, hookimpl, reset_plugins
from comal.serve import REPLAY_EVENT, ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FakeServer

SRC = Path(__file__).resolve().parents[1] / "src"
ROLES = {"user": Role.USER, "bot": Role.ASSISTANT}
STOPS: dict[str, Stop] = {"end_turn": "end_turn", "tool_use": "tool_use", "max": OUTPUT_LENGTH}

# -- the toy protocol ---------------------------------------------------------------------------


def _read(raw: tuple[Any, ...]) -> Sequence[Message]:
    out = []
    for line in raw:
        if not isinstance(line, Mapping) or line.get("by") not in ROLES:
            raise InputError("a line is {by: user|bot, say: text}")
        out.append(Message(ROLES[line["by"]], (Text(str(line.get("say", ""))),)))
    return out


def _said(message: Message) -> str:
    # Text as it is; comal's own parts (a checkpoint, a reference) as their rendering.
    parts = message.parts
    return "".join(p.text if isinstance(p, Text) else render_engine_part(p) for p in parts)


def _render(messages: Sequence[Message]) -> list[Any]:
    return [
        {"by": "bot" if m.role is Role.ASSISTANT else "user", "say": _said(m)} for m in messages
    ]


def _reply(body: Mapping[str, Any]) -> Reply:
    message = Message(Role.ASSISTANT, (Text(str(body.get("said", ""))),))
    return Reply(message, body.get("tokens"), body.get("why"), body.get("id"), body.get("model"))


class _Fold(Accumulator):
    """A toy stream: ``{"piece": text}`` events, then ``{"done": the whole reply}``."""

    def __init__(self) -> None:
        super().__init__()
        self.whole: dict[str, Any] = {}

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        value = json.loads(data)
        if "toy_error" in value:
            self.error = value
        elif "done" in value:
            self.whole, self.done = value["done"], True

    def reply(self) -> Reply:
        return _reply(self.whole)


def _events(whole: Mapping[str, Any], chunk: int | None, include_usage: bool) -> Iterator[bytes]:
    text = str(whole.get("said", ""))
    size = chunk or max(len(text), 1)
    for i in range(0, len(text), size):
        yield sse(None, {"piece": text[i : i + size]})
    yield sse(None, {"done": dict(whole)})


def _response(reply: WireReply) -> dict[str, Any]:
    return {"id": reply.id, "model": reply.model, "said": reply.content, "why": reply.stop,
            "tokens": reply.usage}  # fmt: skip


def _usage_of(counts: Mapping[str, int | None]) -> dict[str, Any]:
    # toy reports its tokens in OpenAI Chat's words, so normalize_usage reads them as such.
    prompt = (counts.get("new_input") or 0) + (counts.get("cache_read") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": counts.get("output") or 0}


def _error(status: int, message: str) -> dict[str, Any]:
    return {"toy_error": {"status": status, "says": message}}


TOY = WireProtocol(
    name="toy",
    title="Toy Lines",
    routes=("/v1/toy",),
    conversation="lines",
    read=_read,
    render=_render,
    reply=_reply,
    stop=lambda raw, detail: STOPS.get(raw or "", "error"),
    usage="openai_chat",
    accumulator=_Fold,
    ends=(b'"done"',),
    content=_said,
    usage_of=_usage_of,
    response=_response,
    events=_events,
    error=_error,
    stream_error=lambda message: sse(None, _error(502, message)),
    upstream="openai",
    auth=("authorization", "Bearer "),
    request_id="x-toy-request",
    client="toy-client",
    max_keys=("limit",),
)


@hookimpl
def comal_wire_protocols() -> list[WireProtocol]:
    return [TOY]


# -- the test -----------------------------------------------------------------------------------


@pytest.fixture
def toy() -> Iterator[WireProtocol]:
    reset_plugins()
    enable_plugins([__name__], where="the test")
    yield wire_protocol("toy")
    reset_plugins()


def _post(url: str, lines: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    body = {"model": "toy-1", "limit": 64, "lines": lines, **extra}
    return httpx.post(f"{url}/v1/toy", json=body, headers={"x-comal-session": "t1"}, timeout=30)


def _events_of(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(x.removeprefix("data: ")) for x in response.text.split("\n\n") if x]


def test_a_toy_protocol_goes_through_the_proxy_fakeserver_and_the_ledger(
    tmp_path: Path, toy: WireProtocol
) -> None:
    assert protocol_for_route("/v1/toy") is toy is TOY
    usage = {"input_tokens": 7, "output_tokens": 3}
    script = [
        {"content": "hello there", "usage": usage},
        {"content": "streamed back", "usage": usage},
    ]
    lines = [{"by": "user", "say": "hi"}]
    with FakeServer(script, chunk=4) as fake:
        led = open_ledger(tmp_path / "l.db")
        config = ServeConfig(upstream_openai=fake.openai_base_url)
        with ServerThread(create_app(config, ledger=led)) as server:
            first = _post(server.url, lines)
            assert first.status_code == 200, first.text
            assert first.json()["said"] == "hello there" and first.json()["why"] == "end_turn"
            assert first.headers["x-comal-session"] and first.headers["x-toy-request"]
            # A session with nothing to manage goes upstream as the client's bytes, in toy.
            assert fake.requests[0].path == "/v1/toy"
            assert fake.requests[0].raw == first.request.content
            lines += [{"by": "bot", "say": "hello there"}, {"by": "user", "say": "more"}]
            streamed = _events_of(_post(server.url, lines, stream=True))
            assert "".join(e.get("piece", "") for e in streamed) == "streamed back"
            assert streamed[-1]["done"]["said"] == "streamed back"
            bad = _post(server.url, [{"by": "robot", "say": "?"}])
            assert bad.status_code == 400 and "lines[0]" in bad.json()["toy_error"]["says"]
        # After a restart, the client's retry of a reply stored but not known delivered is
        # given it again from the ledger, in toy's stream, without asking upstream.
        with ServerThread(create_app(config, ledger=led)) as server:
            again = _post(server.url, lines, stream=True)
            assert again.headers["x-comal-replay"]
            assert _events_of(again)[-1] == streamed[-1]
        assert len(fake.requests) == 2
        (info,) = led.sessions()
        said = [(e.role, e.message.text) for e in led.entries(info.scope)]
        assert said == [("user", "hi"), ("assistant", "hello there"), ("user", "more"),
                        ("assistant", "streamed back")]  # fmt: skip
        records = led.requests(info.scope)
        assert [(r.protocol, r.meta["route"], r.meta["stream"]) for r in records] == [
            ("toy", "toy", False), ("toy", "toy", True),
        ]  # fmt: skip
        assert [(r.new_input, r.output) for r in records] == [(7, 3), (7, 3)]
        assert info.meta["protocol"] == "toy" and info.agent == "toy-client"
        assert len(led.records(info.scope, "event", kinds=(REPLAY_EVENT,))) == 1
        assert verify(led).ok
        led.close()
    fake.assert_complete()


def _plugin(protocol: WireProtocol) -> Callable[[], list[WireProtocol]]:
    @hookimpl
    def comal_wire_protocols() -> list[WireProtocol]:
        return [protocol]

    return comal_wire_protocols


def test_a_protocol_name_or_route_registered_twice_is_refused(
    toy: WireProtocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    twins = {  # a plugin's protocol, and what of it another plugin already registers
        "toy_again": (dataclasses.replace(toy, routes=("/v1/toy2",)), "protocol 'toy'"),
        "toy_on_messages": (
            dataclasses.replace(toy, name="toy2", routes=("/v1/messages",)),
            "route '/v1/messages', which plugin 'comal-wire'",
        ),
    }
    for name, (twin, taken) in twins.items():
        plugin = types.ModuleType(name)
        plugin.comal_wire_protocols = _plugin(twin)  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, plugin)
        with pytest.raises(PluginConflict) as info:
            enable_plugins([name], where="the test")
        assert info.value.plugin == name and taken in str(info.value), str(info.value)
    assert wire_protocol("toy") is TOY and protocol_for_route("/v1/messages") is not None


def test_comal_sources_know_nothing_of_the_toy_protocol() -> None:
    for path in SRC.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert "/v1/toy" not in source and "Toy Lines" not in source, path
