"""Errors of a model call, and the mapping from the SDKs' exceptions into them.

The part of the tree (see :mod:`comal.errors`) that providers add::

    ComalError
    ├── UserError
    │   └── ProviderConfigError        a model spec or adapter option that cannot work
    │       └── MissingAPIKey          the key's environment variable is unset
    ├── BudgetError
    │   └── ContextLength              CONTEXT_LENGTH (OUT-1)
    │       └── ContextLengthExceeded  the provider's own rejection, also a ProviderError
    └── ProviderError                  the call failed; ``status_code``, ``body``, ``provider``
        ├── ProviderConnectionError    no response: connection refused, timeout, dropped stream
        ├── ProviderRateLimited        429, after the retries
        ├── ProviderUnavailable        5xx or overloaded, after the retries
        ├── ProviderAuthError          401 / 403
        ├── ProviderRequestError       any other 4xx; never retried
        └── ProviderProtocolError      an answer comal cannot read (no choices, a cut stream)

``except ContextLength`` catches a rejected input whichever layer noticed it (the budget before the
call, or the provider); ``except ProviderError`` catches every failed call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ComalError, ContextLength, UserError

__all__ = [
    "ContextLengthExceeded",
    "MissingAPIKey",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderProtocolError",
    "ProviderRateLimited",
    "ProviderRequestError",
    "ProviderUnavailable",
    "error_for_status",
    "is_context_length",
    "map_sdk_error",
]


class ProviderConfigError(UserError):
    code = "PROVIDER_CONFIG"


class MissingAPIKey(ProviderConfigError):
    """The API key's environment variable is unset; ``variable`` names it."""

    code = "PROVIDER_MISSING_KEY"

    def __init__(self, variable: str, provider: str) -> None:
        self.variable = variable
        self.provider = provider
        super().__init__(
            f"{variable} is not set, so the {provider} provider has no API key; "
            f"export {variable}=... or pass api_key= to the provider"
        )


class ProviderError(ComalError):
    """A model call failed. ``status_code`` is the HTTP status (``None`` without a response),
    ``body`` the decoded error body as the provider sent it."""

    code = "PROVIDER_ERROR"

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        body: object = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.body = body
        self.request_id = request_id


class ProviderConnectionError(ProviderError):
    code = "PROVIDER_CONNECTION"


class ProviderRateLimited(ProviderError):
    code = "PROVIDER_RATE_LIMITED"


class ProviderUnavailable(ProviderError):
    code = "PROVIDER_UNAVAILABLE"


class ProviderAuthError(ProviderError):
    code = "PROVIDER_AUTH"


class ProviderRequestError(ProviderError):
    code = "PROVIDER_BAD_REQUEST"


class ProviderProtocolError(ProviderError):
    code = "PROVIDER_PROTOCOL"


class ContextLengthExceeded(ContextLength, ProviderError):
    """OUT-1: the provider rejected the input as too long. Compact and call again."""

    code = "CONTEXT_LENGTH"


# Phrases the providers use when the input does not fit: Anthropic ("prompt is too long: 201234
# tokens > 200000 maximum", "input length and `max_tokens` exceed context limit"), OpenAI and
# vLLM ("maximum context length is 128000 tokens"), llama.cpp ("exceeds the available context
# size"). Matched only on 400/413 bodies, so an unrelated error that mentions context is not
# mistaken for one.
_CONTEXT_PHRASES = re.compile(
    r"prompt is too long|context[ _](?:length|window|size|limit)|maximum context|"
    r"too many (?:input )?tokens",
    re.IGNORECASE,
)
_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


def _error_object(body: object) -> Mapping[str, Any]:
    """The ``{type, message, code}`` object of an error body, whichever wrapper it came in."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        return inner if isinstance(inner, Mapping) else body
    return {}


def _error_message(body: object) -> str:
    if isinstance(body, str):
        return body
    message = _error_object(body).get("message")
    return message if isinstance(message, str) else ""


def is_context_length(status_code: int | None, body: object) -> bool:
    """Whether an error body says the input was too long for the model (OUT-1)."""
    err = _error_object(body)
    if err.get("code") in _CONTEXT_CODES or err.get("type") in _CONTEXT_CODES:
        return True
    if status_code == 413 or err.get("type") == "request_too_large":
        # The request body is over the provider's byte limit: input rejected for its size.
        return True
    if status_code not in (400, None, 200):
        return False
    return _CONTEXT_PHRASES.search(_error_message(body)) is not None


# The status an error type stands for, for errors that arrive inside a stream whose HTTP status
# was 200 (Anthropic ``event: error``, a Responses ``error`` event).
_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}


def _effective_status(status_code: int | None, body: object) -> int | None:
    if status_code is not None and status_code >= 400:
        return status_code
    err = _error_object(body)
    for key in ("type", "code"):
        value = err.get(key)
        if isinstance(value, str) and value in _TYPE_STATUS:
            return _TYPE_STATUS[value]
    return status_code


def error_for_status(
    status_code: int | None,
    body: object,
    *,
    provider: str,
    request_id: str | None = None,
    attempts: int = 1,
) -> ProviderError:
    """The typed error for a failed call; ``attempts`` counts the tries made (retries + 1).

    ``status_code`` is kept as received; the class follows the error's type when the status
    says nothing (an error event in a stream that started with 200).
    """
    detail = _error_message(body) or "no error message"
    err_type = _error_object(body).get("type")
    what = " ".join(str(x) for x in (status_code, err_type) if x is not None) or "no status"
    after = f" after {attempts} attempts" if attempts > 1 else ""
    kwargs: dict[str, Any] = {
        "provider": provider,
        "status_code": status_code,
        "body": body,
        "request_id": request_id,
    }
    status = _effective_status(status_code, body)
    if is_context_length(status, body):
        return ContextLengthExceeded(
            f"{provider} rejected the input as too long ({what}): {detail}; "
            "compact the context or lower the output reserve, then call again",
            **kwargs,
        )
    if status == 429:
        return ProviderRateLimited(
            f"{provider} rate-limited the request{after} ({what}): {detail}; "
            "wait and try again, or lower the request rate",
            **kwargs,
        )
    if status is not None and status >= 500:
        return ProviderUnavailable(
            f"{provider} failed{after} ({what}): {detail}; the provider is having trouble, "
            "try again later",
            **kwargs,
        )
    if status in (401, 403):
        return ProviderAuthError(
            f"{provider} refused the credentials ({what}): {detail}; check the API key and "
            "its permissions",
            **kwargs,
        )
    if status is not None and 400 <= status < 500:
        return ProviderRequestError(
            f"{provider} rejected the request ({what}): {detail}; this is not retried, fix "
            "the request (model name, parameters, message shape)",
            **kwargs,
        )
    return ProviderError(f"{provider} call failed ({what}): {detail}", **kwargs)


def map_sdk_error(exc: BaseException, provider: str, attempts: int = 1) -> ComalError | None:
    """The comal error for an ``anthropic`` or ``openai`` SDK exception; ``None`` for others."""
    # Imported here: only a process that talked to a provider pays for the SDKs (they are
    # loaded by then), and ``comal --help`` stays fast.
    import anthropic
    import openai

    if isinstance(exc, (anthropic.APIStatusError, openai.APIStatusError)):
        return error_for_status(
            exc.status_code,
            exc.body,
            provider=provider,
            request_id=exc.request_id,
            attempts=attempts,
        )
    if isinstance(exc, (anthropic.APIConnectionError, openai.APIConnectionError)):
        after = f" after {attempts} attempts" if attempts > 1 else ""
        return ProviderConnectionError(
            f"could not reach {provider}{after}: {exc.message}; check the network and the base "
            "URL, then try again",
            provider=provider,
        )
    if isinstance(exc, (anthropic.APIError, openai.APIError)):
        # An error event inside a stream: there is a body but no failing HTTP status.
        return error_for_status(None, exc.body, provider=provider, attempts=attempts)
    return None
