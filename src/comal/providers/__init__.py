"""Model providers: one seam, three SDK adapters, normalized outcomes (OUT-1..3, TOK-1, CCH-1).

The seam is :class:`Provider` — ``request(ModelRequest) -> ModelResponse`` — with an optional
``stream(req, on_event)`` (:class:`StreamingProvider`) that reports :class:`TextDelta`,
:class:`ToolCallStart`, :class:`ToolCallDelta` and :class:`StreamDone` while the answer arrives
and returns the same :class:`ModelResponse`. :func:`call_model` picks whichever fits.

Adapters over the official SDKs: :class:`AnthropicProvider` (Messages API),
:class:`OpenAIChatProvider` (Chat Completions, also for vLLM, Ollama, llama.cpp by ``base_url``)
and :class:`OpenAIResponsesProvider` (Responses API).

Model specs (``scheme:rest``) are read by the :class:`ProviderScheme` registered for their scheme
(:mod:`._schemes`): the four SDK schemes (``anthropic``, ``openai``, ``openai-responses``,
``openai-compat``; :mod:`._plugin`), the ``script:`` model (:mod:`comal.providers.script`) and
any a plugin adds (:mod:`comal.plugins`). :func:`provider_for` builds a provider from a spec
with a :class:`ProviderContext`; :func:`check_model_spec` checks one before anything is built;
:func:`provider_from_spec` is the keyword form of :func:`provider_for`.

Outcomes are normalized: ``ModelResponse.stop`` is one of :data:`Stop` (:func:`normalize_stop`),
usage is :class:`comal.tokens.Usage`; a response that ran out of output is returned with stop
:data:`OUTPUT_LENGTH` and ``incomplete`` true, so its tool calls are discarded (OUT-2); an input
the provider rejects as too long raises :class:`ContextLengthExceeded`, a
:class:`comal.errors.ContextLength`. Transient failures are retried per :class:`RetryPolicy`;
everything else surfaces as a :class:`ProviderError` (tree in :mod:`comal.providers._errors`).

The script format and the providers that follow a script (:class:`~.script.ScriptedProvider`,
the session's ``script:`` model) are in :mod:`comal.providers.script`; fakes for tests — those,
and a local HTTP server speaking all three wire formats — are in :mod:`comal.testing`.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._anthropic_params import anthropic_params
from ._base import SDKProvider
from ._errors import (
    ContextLengthExceeded,
    MissingAPIKey,
    ProviderAuthError,
    ProviderConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderProtocolError,
    ProviderRateLimited,
    ProviderRequestError,
    ProviderUnavailable,
)
from ._retry import RetryPolicy
from ._schemes import (
    ModelSpec,
    ProviderContext,
    ProviderScheme,
    catalog_specs,
    check_model_spec,
    model_name_of,
    normalize_model_spec,
    provider_for,
    provider_schemes,
    work_step_spec,
)
from ._spec import provider_from_spec
from ._stops import normalize_stop
from ._types import (
    CONTEXT_LENGTH,
    OUTPUT_LENGTH,
    CachePolicy,
    ModelRequest,
    ModelResponse,
    OnEvent,
    Provider,
    Stop,
    StreamDone,
    StreamEvent,
    StreamingProvider,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    ToolSpec,
    call_model,
    replay_events,
)

__all__ = [
    "CONTEXT_LENGTH",
    "OUTPUT_LENGTH",
    "AnthropicProvider",
    "CachePolicy",
    "ContextLengthExceeded",
    "MissingAPIKey",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "OnEvent",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderContext",
    "ProviderError",
    "ProviderProtocolError",
    "ProviderRateLimited",
    "ProviderRequestError",
    "ProviderScheme",
    "ProviderUnavailable",
    "RetryPolicy",
    "SDKProvider",
    "Stop",
    "StreamDone",
    "StreamEvent",
    "StreamingProvider",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolSpec",
    "anthropic_params",
    "call_model",
    "catalog_specs",
    "check_model_spec",
    "model_name_of",
    "normalize_model_spec",
    "normalize_stop",
    "provider_for",
    "provider_from_spec",
    "provider_schemes",
    "replay_events",
    "work_step_spec",
]

if TYPE_CHECKING:
    from ._anthropic import AnthropicProvider
    from ._openai_chat import OpenAIChatProvider
    from ._openai_responses import OpenAIResponsesProvider

# The SDK adapters load their SDKs (over a second of imports): only on first use, so a command
# that never calls a model (``comal --help``, ``comal sessions``) never pays for them.
_LAZY = {
    "AnthropicProvider": "._anthropic",
    "OpenAIChatProvider": "._openai_chat",
    "OpenAIResponsesProvider": "._openai_responses",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
