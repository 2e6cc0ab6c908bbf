"""Retries of a model call: 429, 5xx and connection failures, with backoff; nothing else.

Retries are comal's, not the SDKs': every adapter builds its SDK client with ``max_retries=0``
and wraps the call in :meth:`RetryPolicy.run` (tenacity). One policy then holds for all providers,
and it is exactly the one we state: the SDKs also retry 408 and 409 and obey ``x-should-retry:
true`` on any status, so a 4xx could be sent again. Here a 4xx other than 429 is never retried,
and ``x-should-retry: false`` stops a retry the status would allow.

The wait grows exponentially from ``initial`` up to ``maximum`` with jitter; a ``retry-after-ms``
or ``retry-after`` header (seconds) lengthens it, up to ``max_retry_after``. A stream is retried
only while it is being opened — once an event has been handed to the caller, a retry would
repeat it, so a stream that breaks later fails with :class:`ProviderConnectionError`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

__all__ = ["RetryPolicy", "is_transient", "retry_after_seconds"]

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Whether a failed attempt may succeed if sent again: 429, 5xx, or no response at all."""
    import anthropic  # see map_sdk_error: the SDKs load only where they are used
    import openai

    if isinstance(exc, (anthropic.APIConnectionError, openai.APIConnectionError)):
        return True  # includes timeouts
    if isinstance(exc, (anthropic.APIStatusError, openai.APIStatusError)):
        if exc.response.headers.get("x-should-retry") == "false":
            return False
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The wait a failed response asked for, from ``retry-after-ms`` or ``retry-after``."""
    import anthropic
    import openai

    if not isinstance(exc, (anthropic.APIStatusError, openai.APIStatusError)):
        return None
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date; the exponential wait is a fine stand-in
        return max(seconds, 0.0)
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a transient failure is retried. ``attempts`` counts every
    try, the first included; ``attempts=1`` never retries."""

    attempts: int = 4
    initial: float = 0.5
    maximum: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def wait(self, state: RetryCallState) -> float:
        """Seconds to wait before the next attempt (tenacity's ``wait`` hook)."""
        backoff = min(self.initial * 2.0 ** (state.attempt_number - 1), self.maximum)
        backoff *= 1.0 - self.jitter * random.random()
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after_seconds(exc)
        if asked is None:
            return backoff
        return min(max(asked, backoff), self.max_retry_after)

    def run(self, fn: Callable[[], T]) -> T:
        """Call ``fn``, retrying transient failures; the last failure is re-raised as is."""
        retrying = Retrying(
            stop=stop_after_attempt(max(self.attempts, 1)),
            wait=self.wait,
            retry=retry_if_exception(is_transient),
            sleep=self.sleep,
            reraise=True,
        )
        return retrying(fn)


NO_RETRY = RetryPolicy(attempts=1)
