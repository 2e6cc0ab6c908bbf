"""The three adapters end to end: official SDK clients over real HTTP to the local FakeServer.

Every behaviour here holds for Anthropic Messages, OpenAI Chat Completions and OpenAI Responses
alike, so each test runs once per adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from comal.errors import ContextLength, UserError
from comal.messages import Media, Message, Role, Text, ToolCall
from comal.providers import (
    OUTPUT_LENGTH,
    AnthropicProvider,
    ContextLengthExceeded,
    ModelRequest,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderUnavailable,
    RetryPolicy,
    SDKProvider,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from comal.testing import FakeServer

MODEL = "claude-sonnet-4-6"  # not on the SDK's deprecation list, which would warn
INPUT = {"path": 'docs/ñandú "q".txt', "lines": [1, 2.5], "opts": {"raw": True, "x": None}}
TOOLS = [
    {
        "name": "read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[FakeServer, RetryPolicy], SDKProvider]
    # The canonical arguments for INPUT: Anthropic sends an object that the wire converter
    # serializes compactly; OpenAI sends text, which is kept byte for byte.
    arguments: Callable[[dict[str, Any]], str]


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _as_sent(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)  # the FakeServer's text


CASES = [
    Case(
        "anthropic",
        lambda s, r: AnthropicProvider(api_key="k", base_url=s.anthropic_base_url, retry=r),
        _compact,
    ),
    Case(
        "openai_chat",
        lambda s, r: OpenAIChatProvider(api_key="k", base_url=s.openai_base_url, retry=r),
        _as_sent,
    ),
    Case(
        "openai_responses",
        lambda s, r: OpenAIResponsesProvider(api_key="k", base_url=s.openai_base_url, retry=r),
        _as_sent,
    ),
]


class Sleeps:
    """A retry policy's sleep that records instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture(params=CASES, ids=lambda c: c.name)
def case(request: pytest.FixtureRequest) -> Case:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def connect(case: Case, sleeps: Sleeps) -> Iterator[Callable[[FakeServer], SDKProvider]]:
    opened: list[SDKProvider] = []

    def make(server: FakeServer) -> SDKProvider:
        provider = case.build(server, RetryPolicy(attempts=3, sleep=sleeps))
        opened.append(provider)
        return provider

    yield make
    for provider in opened:
        provider.close()


def ask(text: str = "hi", **kw: Any) -> ModelRequest:
    return ModelRequest(model=MODEL, system="Be brief.", messages=[Message.user(text)], **kw)


TOOL_REPLY = {
    "content": [
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_01", "name": "read", "input": INPUT},
    ],
    "usage": {"input_tokens": 20, "output_tokens": 9},
}


def test_plain_text(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1, TOK-1
    with FakeServer(
        [{"content": "Hello there.", "usage": {"input_tokens": 11, "output_tokens": 4}}]
    ) as s:
        response = connect(s).request(ask())
        s.assert_complete()
    assert response.message == Message.assistant("Hello there.")
    assert response.stop == "end_turn" and not response.incomplete
    assert response.usage.output == 4 and response.usage.input_total == 11
    assert response.usage.cache_write is None  # not reported: unknown, never 0
    assert response.model == MODEL
    assert response.request_id == "req_fake_1"
    assert len(s.requests) == 1


def test_tool_use_arguments_exact(case: Case, connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1
    with FakeServer([TOOL_REPLY]) as s:
        response = connect(s).request(ask(tools=TOOLS))
    assert response.stop == "tool_use"
    assert response.message.parts[0] == Text("Reading it.")
    (call,) = response.runnable_calls
    assert call == ToolCall("toolu_01", "read", case.arguments(INPUT))
    assert json.loads(call.arguments) == INPUT


def test_stream_assembles_tool_call_deltas_exactly(
    case: Case, connect: Callable[[FakeServer], SDKProvider]
) -> None:
    # covers: OUT-1
    events: list[StreamEvent] = []
    with FakeServer([TOOL_REPLY, TOOL_REPLY], chunk=3) as s:
        provider = connect(s)
        streamed = provider.stream(ask(tools=TOOLS), events.append)
        whole = provider.request(ask(tools=TOOLS))
        assert s.requests[0].body["stream"] is True
    # The streamed answer is the very response a whole answer gives.
    assert streamed.message == whole.message
    assert (streamed.stop, streamed.usage) == (whole.stop, whole.usage)
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert starts == [ToolCallStart(0, "toolu_01", "read")]
    assert len(deltas) > 10  # really cut into pieces, mid-escape and mid-key
    assert "".join(d.arguments for d in deltas) == _as_sent(INPUT)
    assert {(d.index, d.call_id) for d in deltas} == {(0, "toolu_01")}
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Reading it."
    assert isinstance(events[-1], StreamDone) and events[-1].response == streamed


def test_output_length_is_returned_incomplete(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1, OUT-2
    cut = {**TOOL_REPLY, "stop_reason": "max_tokens"}
    with FakeServer([cut, cut]) as s:
        provider = connect(s)
        for response in (provider.request(ask()), provider.stream(ask(), lambda e: None)):
            assert response.stop == OUTPUT_LENGTH
            assert response.incomplete
            assert response.message.tool_calls  # kept for the ledger ...
            assert response.runnable_calls == ()  # ... but never run


def test_context_length_raises(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "context_length"}, {"content": "unused"}]) as s:
        with pytest.raises(ContextLength) as info:
            connect(s).request(ask())
        assert len(s.requests) == 1  # a 400 is not retried
    err = info.value
    assert isinstance(err, ContextLengthExceeded) and isinstance(err, ProviderError)
    assert err.code == "CONTEXT_LENGTH"
    assert err.status_code == 400 and err.body is not None
    assert "compact" in str(err)


def test_stream_context_length_raises(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "context_length"}]) as s:
        with pytest.raises(ContextLength):
            connect(s).stream(ask(), lambda e: None)


def test_rate_limit_is_retried_then_succeeds(
    connect: Callable[[FakeServer], SDKProvider], sleeps: Sleeps
) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "rate_limit"}, {"content": "ok"}]) as s:
        response = connect(s).request(ask())
        assert len(s.requests) == 2
    assert response.message.text == "ok"
    assert len(sleeps.waits) == 1


def test_stream_open_is_retried(
    connect: Callable[[FakeServer], SDKProvider], sleeps: Sleeps
) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "server"}, {"content": "ok"}]) as s:
        response = connect(s).stream(ask(), lambda e: None)
        assert len(s.requests) == 2
    assert response.message.text == "ok" and len(sleeps.waits) == 1


def test_bad_request_is_not_retried(
    connect: Callable[[FakeServer], SDKProvider], sleeps: Sleeps
) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "bad_request"}, {"content": "unused"}]) as s:
        with pytest.raises(ProviderRequestError) as info:
            connect(s).request(ask())
        assert len(s.requests) == 1 and s.remaining == 1
    assert info.value.status_code == 400 and sleeps.waits == []
    assert "not retried" in str(info.value)


def test_server_errors_exhaust_the_retries(
    connect: Callable[[FakeServer], SDKProvider], sleeps: Sleeps
) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "server"}] * 3) as s:
        with pytest.raises(ProviderUnavailable) as info:
            connect(s).request(ask())
        assert len(s.requests) == 3
    assert info.value.status_code == 500 and "after 3 attempts" in str(info.value)
    assert len(sleeps.waits) == 2 and sleeps.waits[0] < sleeps.waits[1]


def test_rate_limit_after_the_retries(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-1
    with FakeServer([{"error": "rate_limit"}] * 3) as s:
        with pytest.raises(ProviderRateLimited) as info:
            connect(s).request(ask())
    assert info.value.status_code == 429 and info.value.request_id == "req_fake_3"


def test_usage_unknown_stays_none(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: TOK-1
    with FakeServer([{"content": "no usage at all"}]) as s:
        response = connect(s).request(ask())
    assert response.usage.new_input is None and response.usage.output is None
    assert response.raw_usage is None or response.raw_usage == {}


def test_invalid_request_sends_nothing(connect: Callable[[FakeServer], SDKProvider]) -> None:
    # covers: OUT-2
    # Media with neither data nor a reference cannot go on any wire: refused before sending.
    broken = Message(Role.USER, (Text("look"), Media("image/png")))
    with FakeServer([{"content": "unused"}]) as s:
        with pytest.raises(UserError, match="neither data nor a reference"):
            connect(s).request(ModelRequest(model=MODEL, messages=[broken]))
        assert s.requests == []
