"""What only the Anthropic adapter does: request fields, thinking, its stop reasons and errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from comal.errors import ContextLength, UserError
from comal.messages import Message, Reasoning, Text
from comal.messages.wire import from_anthropic_message
from comal.providers import (
    CONTEXT_LENGTH,
    AnthropicProvider,
    CachePolicy,
    ModelRequest,
    ProviderRateLimited,
    ProviderUnavailable,
    RetryPolicy,
)
from comal.providers._anthropic import _exact_input
from comal.testing import FakeServer

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
def claude(server: FakeServer) -> Iterator[AnthropicProvider]:
    retry = RetryPolicy(attempts=3, sleep=lambda s: None)
    with AnthropicProvider(api_key="sk-test", base_url=server.anthropic_base_url, retry=retry) as p:
        yield p


def ask(*messages: Message, **kw: object) -> ModelRequest:
    return ModelRequest(model=MODEL, messages=messages or (Message.user("hi"),), **kw)  # type: ignore[arg-type]


def test_request_fields(claude: AnthropicProvider, server: FakeServer) -> None:
    # covers: OUT-3
    server.add({"content": "ok"})
    claude.request(ask(system="Sys.", max_output_tokens=321, effort="low", temperature=0.2))
    (sent,) = server.requests
    body = sent.body
    assert sent.path == "/v1/messages"
    assert body["model"] == MODEL and body["max_tokens"] == 321
    assert body["output_config"] == {"effort": "low"}
    assert body["temperature"] == 0.2  # no SDK argument any more: sent through extra_body
    assert "stream" not in body
    assert sent.headers["authorization"] == "Bearer sk-test"


def test_leading_system_messages_join_the_system_prompt(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    server.add({"content": "ok"})
    claude.request(ask(Message.system("Project rules."), Message.user("hi"), system="Identity."))
    system = server.requests[0].body["system"]
    assert [b["text"] for b in system] == ["Identity.", "Project rules."]
    assert "cache_control" in system[-1] and "cache_control" not in system[0]


def test_system_message_mid_conversation_sends_nothing(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: OUT-2
    late = (Message.user("hi"), Message.assistant("yo"), Message.system("new rule"))
    with pytest.raises(UserError, match="single system prompt"):
        claude.request(ask(*late))
    assert server.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_thinking_keeps_its_signature(
    claude: AnthropicProvider, server: FakeServer, stream: bool
) -> None:
    # covers: OUT-1
    thinking = {"type": "thinking", "thinking": "Check a first.", "signature": "EqQBCkYIBx=="}
    server.add({"content": [thinking, {"type": "text", "text": "Checked."}]})
    response = claude.stream(ask(), lambda e: None) if stream else claude.request(ask())
    assert response.message.parts == (
        Reasoning("Check a first.", signature="EqQBCkYIBx==", provider="anthropic"),
        Text("Checked."),
    )


def test_history_goes_back_as_sent(claude: AnthropicProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add(
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"d": "."}}]},
        {"content": "Two files."},
    )
    first = claude.request(ask())
    call = first.message.tool_calls[0]
    claude.request(ask(Message.user("hi"), first.message, Message.tool(call.id, "a\nb")))
    messages = server.requests[1].body["messages"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"d": "."}}
    ]
    assert messages[2]["content"][0]["type"] == "tool_result"
    assert messages[2]["content"][0]["content"] == "a\nb"


def test_context_window_exceeded_while_generating(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: OUT-1, OUT-2
    server.add({"content": "partial", "stop_reason": "model_context_window_exceeded"})
    response = claude.request(ask())
    assert response.stop == CONTEXT_LENGTH and response.incomplete
    assert response.raw_stop == "model_context_window_exceeded"


@pytest.mark.parametrize(
    ("raw", "stop"),
    [("stop_sequence", "end_turn"), ("refusal", "refusal"), ("pause_turn", "error")],
)
def test_other_stop_reasons(
    claude: AnthropicProvider, server: FakeServer, raw: str, stop: str
) -> None:
    # covers: OUT-1
    server.add({"content": "x", "stop_reason": raw})
    assert claude.request(ask()).stop == stop


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "input length and `max_tokens` exceed context limit: 198000 + 21333 > 200000"),
        (413, "Request exceeds the maximum allowed number of bytes."),
    ],
)
def test_other_length_rejections(
    claude: AnthropicProvider, server: FakeServer, status: int, message: str
) -> None:
    # covers: OUT-1
    kind = "request_too_large" if status == 413 else "invalid_request_error"
    body = {"type": "error", "error": {"type": kind, "message": message}}
    server.add({"error": {"status": status, "body": body}})
    with pytest.raises(ContextLength):
        claude.request(ask())
    assert len(server.requests) == 1


def test_overloaded_is_retried(claude: AnthropicProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add({"error": "overloaded"}, {"error": "overloaded"}, {"content": "ok"})
    assert claude.request(ask()).message.text == "ok"
    assert len(server.requests) == 3


def test_overloaded_after_the_retries(claude: AnthropicProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add(*[{"error": "overloaded"}] * 3)
    with pytest.raises(ProviderUnavailable, match="529 overloaded_error"):
        claude.request(ask())


def test_should_retry_false_is_obeyed(claude: AnthropicProvider, server: FakeServer) -> None:
    # covers: OUT-1
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "spend limit"}}
    server.add({"error": {"status": 429, "body": body, "headers": {"x-should-retry": "false"}}})
    with pytest.raises(ProviderRateLimited):
        claude.request(ask())
    assert len(server.requests) == 1


def test_streamed_tool_input_cut_off_is_kept_as_text() -> None:
    # covers: OUT-2
    # max_tokens can stop a stream in the middle of a tool's JSON; the text is kept exactly
    # (the response is OUTPUT_LENGTH and its calls never run) instead of failing to parse.
    cut = '{"path": "a.t'
    block = {"type": "tool_use", "id": "t", "name": "read", "input": _exact_input(cut)}
    (call,) = from_anthropic_message({"content": [block]}).tool_calls
    assert call.arguments == cut
    assert _exact_input("") == {} and _exact_input('{"a": [1]}') == {"a": [1]}


def test_injected_client_is_not_closed(server: FakeServer) -> None:
    # covers: OUT-1
    import anthropic

    server.add({"content": "a"}, {"content": "b"})
    client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url, max_retries=5)
    with AnthropicProvider(client=client) as provider:
        assert provider.client.max_retries == 0  # comal's policy replaces the SDK's retries
        provider.request(ask(cache=CachePolicy.off()))
    assert client.max_retries == 5
    assert client.messages.create(model=MODEL, max_tokens=5, messages=[]).content[0].type == "text"
    client.close()
