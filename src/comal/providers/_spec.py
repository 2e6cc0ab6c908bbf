"""``provider_from_spec``: a model string → a configured provider, kept for callers that
predate the scheme registry; it is :func:`~._schemes.provider_for` with keyword arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._base import DEFAULT_TIMEOUT
from ._retry import RetryPolicy
from ._schemes import ModelSpec, ProviderContext, provider_for

if TYPE_CHECKING:
    from ._types import Provider

__all__ = ["ModelSpec", "provider_from_spec"]


def provider_from_spec(
    spec: str | ModelSpec,
    *,
    env: Mapping[str, str] = os.environ,
    retry: RetryPolicy | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Provider:
    """The provider a model string names, with its key and base URL read from ``env``.

    The model itself goes in each :class:`ModelRequest`; ``ModelSpec.parse(spec).model`` gives it.
    Raises :class:`ProviderConfigError` for a malformed spec or an unknown scheme and
    :class:`MissingAPIKey` when the key's variable is unset — before any client exists.
    """
    return provider_for(str(spec), ProviderContext(env=env, retry=retry, timeout=timeout))
