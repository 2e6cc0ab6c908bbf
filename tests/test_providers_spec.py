"""Model strings, keys from the environment, and typed errors for both going wrong."""

from __future__ import annotations

import pytest

from comal.errors import UserError
from comal.messages import Message
from comal.providers import (
    AnthropicProvider,
    MissingAPIKey,
    ModelRequest,
    ModelSpec,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    ProviderConfigError,
    provider_from_spec,
)
from comal.testing import FakeServer


@pytest.mark.parametrize(
    ("spec", "kind", "model", "base_url"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", None),
        ("openai:gpt-4.1", "openai", "gpt-4.1", None),
        ("openai-responses:o4-mini", "openai-responses", "o4-mini", None),
        (
            "openai-compat:http://localhost:11434/v1#qwen2.5:7b",
            "openai-compat",
            "qwen2.5:7b",
            "http://localhost:11434/v1",
        ),
    ],
)
def test_parse(spec: str, kind: str, model: str, base_url: str | None) -> None:
    # covers: OUT-1
    parsed = ModelSpec.parse(spec)
    assert (parsed.kind, parsed.model, parsed.base_url) == (kind, model, base_url)
    assert str(parsed) == spec


@pytest.mark.parametrize(
    "spec",
    [
        "claude-sonnet-4-5",
        "gemini:flash",
        "anthropic:",
        "openai-compat:http://localhost:8000/v1",
        "openai-compat:localhost:8000#m",
    ],
)
def test_malformed_specs(spec: str) -> None:
    # covers: OUT-1
    with pytest.raises(ProviderConfigError) as info:
        ModelSpec.parse(spec)
    assert isinstance(info.value, UserError)
    assert "write '" in str(info.value)  # the message says how to spell it


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("anthropic:claude-sonnet-4-6", "ANTHROPIC_API_KEY"),
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("openai-responses:o4-mini", "OPENAI_API_KEY"),
    ],
)
def test_missing_key_is_named(spec: str, variable: str) -> None:
    # covers: OUT-1
    with pytest.raises(MissingAPIKey) as info:
        provider_from_spec(spec, env={"OTHER": "x", variable: ""})
    err = info.value
    assert err.variable == variable and err.code == "PROVIDER_MISSING_KEY"
    assert f"export {variable}=" in str(err)


def test_adapter_without_key_or_client() -> None:
    # covers: OUT-1
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        AnthropicProvider()
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        OpenAIResponsesProvider()


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("anthropic:claude-sonnet-4-6", AnthropicProvider),
        ("openai:gpt-4.1", OpenAIChatProvider),
        ("openai-responses:o4-mini", OpenAIResponsesProvider),
    ],
)
def test_spec_builds_the_adapter_with_env_base_url(spec: str, cls: type) -> None:
    # covers: OUT-1
    with FakeServer([{"content": "pong"}]) as server:
        env = {
            "ANTHROPIC_API_KEY": "a-key",
            "OPENAI_API_KEY": "o-key",
            "ANTHROPIC_BASE_URL": server.anthropic_base_url,
            "OPENAI_BASE_URL": server.openai_base_url,
        }
        model = ModelSpec.parse(spec).model
        with provider_from_spec(spec, env=env) as provider:
            assert isinstance(provider, cls)
            response = provider.request(ModelRequest(model=model, messages=[Message.user("ping")]))
    assert response.message.text == "pong"
    (sent,) = server.requests
    assert sent.body["model"] == model
    expected_key = "a-key" if cls is AnthropicProvider else "o-key"
    assert sent.headers["authorization"] == f"Bearer {expected_key}"
