"""The built-in provider plugin: the four schemes over the official SDKs.

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

The adapters import their SDKs (over a second): only :meth:`build` loads them.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..plugins import hookimpl
from ._base import SDKProvider
from ._errors import MissingAPIKey, ProviderConfigError
from ._schemes import ModelSpec, ProviderContext, ProviderScheme

__all__ = ["comal_providers"]

# Compatible servers that check no key still need a non-empty one for the SDK to build a client.
_NO_KEY = "no-key"


def _key(env: Mapping[str, str], variable: str, provider: str) -> str:
    key = env.get(variable)
    if not key:
        raise MissingAPIKey(variable, provider)
    return key


class _Anthropic(ProviderScheme):
    scheme = "anthropic"
    description = "Anthropic Messages API (ANTHROPIC_API_KEY; ANTHROPIC_BASE_URL)"

    def check(self, spec: str, env: Mapping[str, str]) -> None:
        self.parse(spec)
        _key(env, "ANTHROPIC_API_KEY", self.scheme)

    def build(self, spec: str, ctx: ProviderContext) -> SDKProvider:
        from ._anthropic import AnthropicProvider

        self.parse(spec)
        return AnthropicProvider(
            api_key=_key(ctx.env, "ANTHROPIC_API_KEY", self.scheme),
            base_url=ctx.env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
            retry=ctx.retry,
            timeout=ctx.timeout,
        )


class _OpenAI(ProviderScheme):
    scheme = "openai"
    description = "OpenAI Chat Completions (OPENAI_API_KEY; OPENAI_BASE_URL)"

    def check(self, spec: str, env: Mapping[str, str]) -> None:
        self.parse(spec)
        _key(env, "OPENAI_API_KEY", self.scheme)

    def build(self, spec: str, ctx: ProviderContext) -> SDKProvider:
        from ._openai_chat import OpenAIChatProvider

        self.parse(spec)
        api_key = _key(ctx.env, "OPENAI_API_KEY", self.scheme)
        base_url = ctx.env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return OpenAIChatProvider(
            api_key=api_key, base_url=base_url, retry=ctx.retry, timeout=ctx.timeout
        )


class _OpenAIResponses(_OpenAI):
    scheme = "openai-responses"
    description = "OpenAI Responses API (OPENAI_API_KEY; OPENAI_BASE_URL)"

    def build(self, spec: str, ctx: ProviderContext) -> SDKProvider:
        from ._openai_responses import OpenAIResponsesProvider

        self.parse(spec)
        api_key = _key(ctx.env, "OPENAI_API_KEY", self.scheme)
        base_url = ctx.env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return OpenAIResponsesProvider(
            api_key=api_key, base_url=base_url, retry=ctx.retry, timeout=ctx.timeout
        )


class _OpenAICompat(ProviderScheme):
    scheme = "openai-compat"
    description = "an OpenAI-compatible server (vLLM, Ollama, llama.cpp): URL#model"

    def parse(self, spec: str) -> ModelSpec:
        base_url, sep, model = spec.partition(":")[2].partition("#")
        if not sep or not model or not base_url.startswith(("http://", "https://")):
            raise ProviderConfigError(
                f"model spec {spec!r} needs a base URL and a model: write "
                "'openai-compat:http://host:port/v1#model'"
            )
        return ModelSpec(self.scheme, model, base_url)

    def build(self, spec: str, ctx: ProviderContext) -> SDKProvider:
        from ._openai_chat import OpenAIChatProvider

        return OpenAIChatProvider(
            api_key=ctx.env.get("OPENAI_COMPAT_API_KEY") or _NO_KEY,
            base_url=self.parse(spec).base_url,
            retry=ctx.retry,
            timeout=ctx.timeout,
            max_tokens_param="max_tokens",
        )


@hookimpl
def comal_providers() -> tuple[ProviderScheme, ...]:
    return (_Anthropic(), _OpenAI(), _OpenAIResponses(), _OpenAICompat())
