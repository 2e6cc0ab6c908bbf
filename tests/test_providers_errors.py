"""The error tree, context-length detection, the retry policy and the pinned public names."""

from __future__ import annotations

import socket
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from tenacity import RetryCallState, Retrying

import comal.providers as providers
import comal.testing as testing
from comal.errors import BudgetError, ComalError, ContextLength, OutputLength
from comal.messages import Message
from comal.providers import (
    CONTEXT_LENGTH,
    OUTPUT_LENGTH,
    AnthropicProvider,
    ContextLengthExceeded,
    ModelRequest,
    OpenAIChatProvider,
    ProviderAuthError,
    ProviderConnectionError,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderUnavailable,
    RetryPolicy,
    normalize_stop,
)
from comal.providers._errors import error_for_status, is_context_length
from comal.providers._retry import is_transient, retry_after_seconds


def test_length_codes_match_the_errors() -> None:
    # covers: OUT-1
    assert OUTPUT_LENGTH == OutputLength.code and CONTEXT_LENGTH == ContextLength.code
    assert issubclass(ContextLengthExceeded, ContextLength)
    assert issubclass(ContextLengthExceeded, BudgetError)
    assert issubclass(ContextLengthExceeded, ProviderError)
    assert ContextLengthExceeded.code == "CONTEXT_LENGTH"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 201 > 200 maximum",
                },
            },
        ),
        (400, {"message": "Input too long", "code": "context_length_exceeded"}),
        (
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens.",
                "code": 400,
            },
        ),
        (400, {"error": {"type": "exceed_context_size_error", "message": "exceeds"}}),
        (413, {"type": "error", "error": {"type": "request_too_large", "message": "bytes"}}),
        (None, {"code": "context_length_exceeded", "message": "streamed failure"}),
    ],
)
def test_context_length_bodies(status: int | None, body: dict[str, Any]) -> None:
    # covers: OUT-1
    assert is_context_length(status, body)
    assert isinstance(error_for_status(status, body, provider="p"), ContextLength)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        # An output reserve over the model's limit is a bad request, not a full context.
        (400, "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens"),
        (400, "messages.1.content: tool_use ids must be unique"),
        (500, "context window service crashed"),
    ],
)
def test_not_context_length(status: int, message: str) -> None:
    # covers: OUT-1
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    assert not is_context_length(status, body)


@pytest.mark.parametrize(
    ("status", "cls", "code"),
    [
        (429, ProviderRateLimited, "PROVIDER_RATE_LIMITED"),
        (503, ProviderUnavailable, "PROVIDER_UNAVAILABLE"),
        (401, ProviderAuthError, "PROVIDER_AUTH"),
        (404, ProviderRequestError, "PROVIDER_BAD_REQUEST"),
        (409, ProviderRequestError, "PROVIDER_BAD_REQUEST"),
    ],
)
def test_status_classes(status: int, cls: type[ProviderError], code: str) -> None:
    # covers: OUT-1
    err = error_for_status(status, {"error": {"message": "m"}}, provider="p", request_id="r1")
    assert type(err) is cls and err.code == code and isinstance(err, ComalError)
    assert (err.status_code, err.request_id, err.provider) == (status, "r1", "p")
    assert "; " in str(err)  # the message ends with what to do


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (200, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         ProviderUnavailable),
        (None, {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"},
         ProviderRateLimited),
        (None, {"type": "error", "code": "weird", "message": "?"}, ProviderError),
    ],
)  # fmt: skip
def test_errors_inside_a_stream(status: int | None, body: dict[str, Any], cls: type) -> None:
    # covers: OUT-1
    # The HTTP status of a stream was 200; the error event's own type says what went wrong.
    err = error_for_status(status, body, provider="p")
    assert type(err) is cls and err.status_code == status


def sdk_error(status: int, headers: dict[str, str] | None = None) -> Exception:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/messages")
    response = httpx2.Response(status, headers=headers or {}, request=request)
    return anthropic.APIStatusError("x", response=response, body=None)


@pytest.mark.parametrize(
    ("status", "headers", "transient"),
    [
        (429, {}, True),
        (500, {}, True),
        (529, {}, True),
        (400, {}, False),
        (408, {}, False),  # the SDKs retry these; comal does not retry a 4xx other than 429
        (409, {}, False),
        (400, {"x-should-retry": "true"}, False),
        (429, {"x-should-retry": "false"}, False),
    ],
)
def test_transient(status: int, headers: dict[str, str], transient: bool) -> None:
    # covers: OUT-1
    assert is_transient(sdk_error(status, headers)) is transient


def test_connection_errors_are_transient() -> None:
    # covers: OUT-1
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert is_transient(openai.APIConnectionError(request=request))
    assert is_transient(openai.APITimeoutError(request=request))
    assert not is_transient(ValueError("not an SDK error"))


def test_wait_grows_and_honours_retry_after() -> None:
    # covers: OUT-1
    policy = RetryPolicy(initial=1.0, maximum=4.0, jitter=0.0, max_retry_after=30.0)

    def wait(attempt: int, exc: Exception) -> float:
        state = RetryCallState(Retrying(), None, (), {})
        state.attempt_number = attempt
        state.set_exception((type(exc), exc, None))
        return policy.wait(state)

    plain = sdk_error(500)
    assert [wait(n, plain) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 4.0]
    assert wait(1, sdk_error(429, {"retry-after": "7"})) == 7.0
    assert wait(1, sdk_error(429, {"retry-after-ms": "2500"})) == 2.5
    assert wait(1, sdk_error(429, {"retry-after": "600"})) == 30.0  # capped
    assert (
        retry_after_seconds(sdk_error(429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}))
        is None
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("cls", [AnthropicProvider, OpenAIChatProvider])
def test_unreachable_server(cls: type[AnthropicProvider] | type[OpenAIChatProvider]) -> None:
    # covers: OUT-1
    waits: list[float] = []
    retry = RetryPolicy(attempts=2, sleep=waits.append)
    url = f"http://127.0.0.1:{closed_port()}"
    with cls(api_key="k", base_url=url, retry=retry, timeout=5.0) as provider:
        with pytest.raises(ProviderConnectionError, match="after 2 attempts") as info:
            provider.request(ModelRequest(model="m", messages=[Message.user("hi")]))
    assert info.value.status_code is None and len(waits) == 1


def test_normalize_stop_table() -> None:
    # covers: OUT-1
    assert normalize_stop("anthropic", "max_tokens") == OUTPUT_LENGTH
    assert normalize_stop("openai_chat", "length") == OUTPUT_LENGTH
    assert normalize_stop("openai_responses", "incomplete", "max_output_tokens") == OUTPUT_LENGTH
    assert normalize_stop("openai_responses", "incomplete", "content_filter") == "refusal"
    assert normalize_stop("openai_responses", "failed") == "error"
    assert normalize_stop("openai_chat", None) == "error"
    with pytest.raises(ValueError):
        normalize_stop("gemini", "STOP")


PROVIDERS_API = {
    "CONTEXT_LENGTH", "OUTPUT_LENGTH", "AnthropicProvider", "anthropic_params", "CachePolicy",
    "ContextLengthExceeded", "MissingAPIKey", "ModelRequest", "ModelResponse", "ModelSpec",
    "OnEvent", "OpenAIChatProvider", "OpenAIResponsesProvider", "Provider", "ProviderAuthError",
    "ProviderConfigError", "ProviderConnectionError", "ProviderError", "ProviderProtocolError",
    "ProviderRateLimited", "ProviderRequestError", "ProviderUnavailable", "RetryPolicy",
    "SDKProvider", "Stop", "StreamDone", "StreamEvent", "StreamingProvider", "TextDelta",
    "ToolCallDelta", "ToolCallStart", "ToolSpec", "call_model", "normalize_stop",
    "provider_from_spec", "replay_events",
    # the scheme registry (PLG-1): schemes are plugins; one entry point builds any provider
    "ProviderContext", "ProviderScheme", "check_model_spec", "model_name_of",
    "normalize_model_spec", "provider_for", "provider_schemes",
    # what a work step of a session on a spec runs by default (WRK-1)
    "work_step_spec",
    # the models a picker offers (the TUI's /model, the web page)
    "catalog_specs",
}  # fmt: skip

TESTING_API = {
    "ERROR_KINDS", "FakeServer", "FunctionProvider", "RecordedRequest", "ScriptExhausted",
    "ScriptedProvider", "cache_prefix", "cache_serialization", "last_user_text", "load_script",
}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "expected"), [(providers, PROVIDERS_API), (testing, TESTING_API)]
)
def test_exported_members(module: Any, expected: set[str]) -> None:
    # covers: OUT-1
    # dir(), not vars(): the SDK adapters are loaded on first use (PEP 562).
    public = {name for name in dir(module) if not name.startswith("_")}
    assert set(module.__all__) == public == expected
