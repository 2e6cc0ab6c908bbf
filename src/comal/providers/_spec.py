"""Model strings: ``provider:model`` → a configured provider.

======================================  ===========================  =========================
spec                                    adapter                      key (environment)
======================================  ===========================  =========================
``anthropic:claude-sonnet-4-6``         :class:`AnthropicProvider`   ``ANTHROPIC_API_KEY``
``openai:gpt-4.1``                      :class:`OpenAIChatProvider`  ``OPENAI_API_KEY``
``openai-responses:o4-mini``            :class:`OpenAIResponses…`    ``OPENAI_API_KEY``
``openai-compat:http://h:8000/v1#m``    :class:`OpenAIChatProvider`  ``OPENAI_COMPAT_API_KEY``
======================================  ===========================  =========================

``ANTHROPIC_BASE_URL`` and ``OPENAI_BASE_URL`` move the first three elsewhere (a proxy, a gateway).
An OpenAI-compatible server is named by its base URL and the model after ``#``; it is sent
``OPENAI_COMPAT_API_KEY`` if set and a placeholder otherwise, never ``OPENAI_API_KEY`` — an
OpenAI key has no business on a local or third-party server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ._base import DEFAULT_TIMEOUT, SDKProvider
from ._errors import MissingAPIKey, ProviderConfigError
from ._retry import RetryPolicy

__all__ = ["KINDS", "ModelSpec", "provider_from_spec"]

KINDS: Final = ("anthropic", "openai", "openai-responses", "openai-compat")

# Compatible servers that check no key still need a non-empty one for the SDK to build a client.
_NO_KEY = "no-key"


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed model string. ``base_url`` is set for ``openai-compat`` only."""

    kind: str
    model: str
    base_url: str | None = None

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        kind, sep, rest = spec.partition(":")
        if not sep or kind not in KINDS:
            raise ProviderConfigError(
                f"model spec {spec!r} does not start with a known provider; write "
                f"'provider:model' with provider one of {', '.join(KINDS)} "
                "(e.g. 'anthropic:claude-sonnet-4-6')"
            )
        if kind == "openai-compat":
            base_url, sep, model = rest.partition("#")
            if not sep or not model or not base_url.startswith(("http://", "https://")):
                raise ProviderConfigError(
                    f"model spec {spec!r} needs a base URL and a model: write "
                    "'openai-compat:http://host:port/v1#model'"
                )
            return cls(kind, model, base_url)
        if not rest:
            raise ProviderConfigError(f"model spec {spec!r} names no model; write '{kind}:MODEL'")
        return cls(kind, rest)

    def __str__(self) -> str:
        if self.base_url is not None:
            return f"{self.kind}:{self.base_url}#{self.model}"
        return f"{self.kind}:{self.model}"


def _key(env: Mapping[str, str], variable: str, provider: str) -> str:
    key = env.get(variable)
    if not key:
        raise MissingAPIKey(variable, provider)
    return key


def provider_from_spec(
    spec: str | ModelSpec,
    *,
    env: Mapping[str, str] = os.environ,
    retry: RetryPolicy | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> SDKProvider:
    """The provider a model string names, with its key and base URL read from ``env``.

    The model itself goes in each :class:`ModelRequest`; ``ModelSpec.parse(spec).model`` gives it.
    Raises :class:`ProviderConfigError` for a malformed spec and :class:`MissingAPIKey` when the
    key's variable is unset — before any client exists.
    """
    parsed = spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec)
    # The adapters import their SDKs: loaded when a provider is built, not at import.
    from ._anthropic import AnthropicProvider
    from ._openai_chat import OpenAIChatProvider
    from ._openai_responses import OpenAIResponsesProvider

    if parsed.kind == "anthropic":
        return AnthropicProvider(
            api_key=_key(env, "ANTHROPIC_API_KEY", "anthropic"),
            base_url=env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
            retry=retry,
            timeout=timeout,
        )
    if parsed.kind == "openai-compat":
        return OpenAIChatProvider(
            api_key=env.get("OPENAI_COMPAT_API_KEY") or _NO_KEY,
            base_url=parsed.base_url,
            retry=retry,
            timeout=timeout,
            max_tokens_param="max_tokens",
        )
    api_key = _key(env, "OPENAI_API_KEY", parsed.kind)
    base_url = env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    if parsed.kind == "openai":
        return OpenAIChatProvider(api_key=api_key, base_url=base_url, retry=retry, timeout=timeout)
    return OpenAIResponsesProvider(api_key=api_key, base_url=base_url, retry=retry, timeout=timeout)
