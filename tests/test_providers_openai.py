"""What only the OpenAI adapters do: Chat and Responses request fields, compatible servers,
reasoning, refusals, usage, and stream assembly from servers that repeat themselves."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk

from comal.errors import ContextLength
from comal.messages import Message, Reasoning, Text, ToolCall
from comal.providers import (
    ModelRequest,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    RetryPolicy,
    StreamEvent,
    ToolCallDelta,
    ToolCallStart,
    provider_from_spec,
)
from comal.providers._openai_chat import _ChatStream
from comal.testing import FakeServer

NO_RETRY = RetryPolicy(attempts=1)
TOOLS = [{"name": "ls", "description": "List", "input_schema": {"type": "object"}}]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
def chat(server: FakeServer) -> Iterator[OpenAIChatProvider]:
    with OpenAIChatProvider(api_key="sk-x", base_url=server.openai_base_url, retry=NO_RETRY) as p:
        yield p


@pytest.fixture
def responses(server: FakeServer) -> Iterator[OpenAIResponsesProvider]:
    url = server.openai_base_url
    with OpenAIResponsesProvider(api_key="sk-x", base_url=url, retry=NO_RETRY) as p:
        yield p


def ask(model: str = "gpt-4.1", **kw: Any) -> ModelRequest:
    return ModelRequest(model=model, messages=[Message.user("hi")], **kw)


# -- Chat Completions ---------------------------------------------------------------------------


def test_chat_request_fields(chat: OpenAIChatProvider, server: FakeServer) -> None:
    # covers: OUT-3
    server.add({"content": "ok"}, {"content": "ok"})
    chat.request(ask(system="Sys.", tools=TOOLS, max_output_tokens=77, effort="high"))
    chat.stream(ask(temperature=0.5), lambda e: None)
    whole, streamed = (r.body for r in server.requests)
    assert server.requests[0].path == "/v1/chat/completions"
    assert whole["messages"] == [
        {"role": "system", "content": "Sys."},
        {"role": "user", "content": "hi"},
    ]
    assert whole["max_completion_tokens"] == 77 and whole["reasoning_effort"] == "high"
    assert whole["tools"] == [
        {
            "type": "function",
            "function": {"name": "ls", "description": "List", "parameters": {"type": "object"}},
        }
    ]
    assert streamed["stream"] is True and streamed["stream_options"] == {"include_usage": True}
    assert streamed["temperature"] == 0.5


def test_chat_usage_cache_read_only_when_reported(
    chat: OpenAIChatProvider, server: FakeServer
) -> None:
    # covers: TOK-1
    server.add(
        {"content": "a", "usage": {"input_tokens": 10, "output_tokens": 2}},
        {
            "content": "b",
            "usage": {"input_tokens": 4, "cache_read_input_tokens": 6, "output_tokens": 2},
        },
    )
    plain, cached = chat.request(ask()), chat.stream(ask(), lambda e: None)
    assert (plain.usage.new_input, plain.usage.cache_read, plain.usage.cache_write) == (
        10,
        None,
        None,
    )
    assert (cached.usage.new_input, cached.usage.cache_read, cached.usage.cache_write) == (
        4,
        6,
        None,
    )
    assert cached.raw_usage is not None and cached.raw_usage["prompt_tokens"] == 10


def test_chat_reasoning_content(chat: OpenAIChatProvider, server: FakeServer) -> None:
    # covers: OUT-1
    reply = {"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "4"}]}
    server.add(reply, reply)
    expected = (Reasoning("hmm", provider="openai_chat"), Text("4"))
    assert chat.request(ask()).message.parts == expected
    assert chat.stream(ask(), lambda e: None).message.parts == expected


def test_chat_content_filter_is_a_refusal(chat: OpenAIChatProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add({"content": "I can't help with that.", "stop_reason": "refusal"})
    response = chat.request(ask())
    assert response.stop == "refusal" and response.raw_stop == "content_filter"


@pytest.mark.parametrize("flavor", ["vllm", "llamacpp"])
def test_compatible_servers_context_errors(server: FakeServer, flavor: str) -> None:
    # covers: OUT-1
    server.add({"error": "context_length", "flavor": flavor})
    spec = f"openai-compat:{server.openai_base_url}#qwen2.5:7b"
    with provider_from_spec(spec, env={}, retry=NO_RETRY) as provider:
        with pytest.raises(ContextLength):
            provider.request(ask("qwen2.5:7b"))


def test_compatible_server_request(server: FakeServer) -> None:
    # covers: OUT-1
    server.add({"content": "ok"}, {"content": "ok"})
    spec = f"openai-compat:{server.openai_base_url}#llama3"
    secret = {"OPENAI_API_KEY": "sk-real-openai-key"}
    with provider_from_spec(spec, env=secret) as provider:
        provider.request(ask("llama3", max_output_tokens=64))
    with provider_from_spec(spec, env={**secret, "OPENAI_COMPAT_API_KEY": "vllm-key"}) as provider:
        provider.request(ask("llama3"))
    first, second = server.requests
    assert first.body["max_tokens"] == 64 and "max_completion_tokens" not in first.body
    assert first.headers["authorization"] == "Bearer no-key"  # never the OpenAI key
    assert second.headers["authorization"] == "Bearer vllm-key"


def chunk(delta: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "local",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def test_chat_stream_tolerates_repeated_ids_and_names() -> None:
    # covers: OUT-1
    # Some compatible servers resend the call's id, type and name in every chunk; the SDK's
    # generic delta merge would glue them together ("call_1call_1").
    events: list[StreamEvent] = []
    state = _ChatStream(events.append)
    call = {"index": 0, "id": "call_1", "type": "function"}
    state.add(chunk({"role": "assistant", "content": None}))
    for piece in ['{"d"', ': ".', '"}']:
        state.add(chunk({"tool_calls": [{**call, "function": {"name": "ls", "arguments": piece}}]}))
    state.add(chunk({}, "tool_calls"))
    (wire_call,) = state.message()["tool_calls"]
    assert wire_call == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "ls", "arguments": '{"d": "."}'},
    }
    assert [e for e in events if isinstance(e, ToolCallStart)] == [ToolCallStart(0, "call_1", "ls")]
    assert "".join(e.arguments for e in events if isinstance(e, ToolCallDelta)) == '{"d": "."}'


def test_chat_stream_names_calls_without_an_id() -> None:
    # covers: OUT-1
    state = _ChatStream(lambda e: None)
    state.add(chunk({"tool_calls": [{"index": 0, "function": {"name": "ls", "arguments": "{}"}}]}))
    state.add(chunk({"tool_calls": [{"index": 1, "function": {"name": "pwd", "arguments": ""}}]}))
    assert [c["id"] for c in state.message()["tool_calls"]] == ["call_0", "call_1"]


# -- Responses ----------------------------------------------------------------------------------


def test_responses_request_fields(responses: OpenAIResponsesProvider, server: FakeServer) -> None:
    # covers: OUT-3
    server.add({"content": "ok"})
    responses.request(ask("o4-mini", system="Sys.", tools=TOOLS, effort="medium"))
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/responses"
    assert body["instructions"] == "Sys." and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "medium"} and body["max_output_tokens"] == 4096
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "ls",
            "description": "List",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]


def test_responses_without_encrypted_reasoning(server: FakeServer) -> None:
    # covers: OUT-3
    server.add({"content": "ok"})
    url = server.openai_base_url
    with OpenAIResponsesProvider(api_key="k", base_url=url, encrypted_reasoning=False) as p:
        p.request(ask())
    assert "include" not in server.requests[0].body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_reasoning_round_trip(
    responses: OpenAIResponsesProvider, server: FakeServer, stream: bool
) -> None:
    # covers: OUT-1
    thinking = {"type": "thinking", "thinking": "plan", "signature": "gAAAAenc=="}
    server.add({"content": [thinking, {"type": "text", "text": "done"}]}, {"content": "next"})
    first = responses.stream(ask(), lambda e: None) if stream else responses.request(ask())
    reasoning = first.message.parts[0]
    assert isinstance(reasoning, Reasoning)
    assert (reasoning.data, reasoning.summary) == ("gAAAAenc==", ("plan",))
    # The encrypted reasoning goes back next turn, untouched, since nothing is stored server-side.
    responses.request(ModelRequest(model="o4-mini", messages=[Message.user("hi"), first.message]))
    sent = server.requests[1].body["input"][1]
    assert sent["type"] == "reasoning" and sent["encrypted_content"] == "gAAAAenc=="


def test_responses_refusal(responses: OpenAIResponsesProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add({"content": "I can't do that.", "stop_reason": "refusal"})
    response = responses.request(ask())
    assert response.stop == "refusal" and response.message.text == "I can't do that."


def test_responses_incomplete_reason_is_kept(
    responses: OpenAIResponsesProvider, server: FakeServer
) -> None:
    # covers: OUT-1
    server.add({"content": "cut", "stop_reason": "max_tokens"})
    assert responses.request(ask()).raw_stop == "incomplete:max_output_tokens"


def test_responses_usage_reports_observed_zero(
    responses: OpenAIResponsesProvider, server: FakeServer
) -> None:
    # covers: TOK-1
    server.add({"content": "a", "usage": {"input_tokens": 9, "output_tokens": 1}})
    usage = responses.request(ask()).usage
    # The Responses API always reports cached_tokens: here a real 0, not an unknown.
    assert (usage.new_input, usage.cache_read, usage.cache_write) == (9, 0, None)


def test_responses_tool_call(responses: OpenAIResponsesProvider, server: FakeServer) -> None:
    # covers: OUT-1
    server.add({"content": [{"type": "tool_use", "id": "call_7", "name": "ls", "input": {}}]})
    response = responses.request(ask(tools=TOOLS))
    assert response.stop == "tool_use"
    assert response.message.parts == (ToolCall("call_7", "ls", "{}"),)
