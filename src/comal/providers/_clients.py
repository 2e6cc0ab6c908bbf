"""The SDK clients the adapters use, built one way.

The SDKs' own retries are always off (``max_retries=0``): they also retry 408, 409 and any status
a server marks ``x-should-retry``, and comal retries only 429, 5xx and connection errors
(:class:`~comal.providers.RetryPolicy`). A client passed in is copied with its retries off too.
"""

from __future__ import annotations

import anthropic
import openai

from ._errors import MissingAPIKey


def anthropic_client(
    client: anthropic.Anthropic | None,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    provider: str,
) -> anthropic.Anthropic:
    if client is not None:
        return client.with_options(max_retries=0)
    if api_key is None:
        raise MissingAPIKey("ANTHROPIC_API_KEY", provider)
    return anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)


def openai_client(
    client: openai.OpenAI | None,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    provider: str,
) -> openai.OpenAI:
    if client is not None:
        return client.with_options(max_retries=0)
    if api_key is None:
        raise MissingAPIKey("OPENAI_API_KEY", provider)
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
