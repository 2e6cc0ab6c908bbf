"""What the three SDK adapters share: the retry loop, error mapping, closing, the response."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from ..messages import Message, Role, Text
from ..tokens import Usage, normalize_usage
from ._errors import map_sdk_error
from ._retry import RetryPolicy
from ._types import ModelRequest, ModelResponse, OnEvent, Stop

T = TypeVar("T")

UNKNOWN_USAGE = Usage(None, None, None, None, None)

# Output can take minutes; the SDKs' own default is ten. Passing it explicitly also keeps the
# Anthropic SDK from refusing a non-streaming call with a large ``max_tokens`` (its guard only
# applies while the client has the default timeout).
DEFAULT_TIMEOUT = 600.0


class SDKProvider(ABC):
    """Base of the adapters over an official SDK client. ``name`` is the wire protocol tag
    (:data:`comal.messages.wire.PROVIDER_ANTHROPIC` …), also used to normalize usage."""

    name: ClassVar[str]

    def __init__(self, retry: RetryPolicy, owns_client: bool) -> None:
        self.retry = retry
        self._owns_client = owns_client

    @abstractmethod
    def request(self, req: ModelRequest) -> ModelResponse:
        """One model call, answered whole."""

    @abstractmethod
    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        """Like :meth:`request`, reporting text and tool-call deltas to ``on_event`` as they
        arrive and :class:`StreamDone` last."""

    @abstractmethod
    def _close_client(self) -> None:
        """Close the SDK client."""

    def close(self) -> None:
        """Release the HTTP connections, unless the client was handed in by the caller."""
        if self._owns_client:
            self._close_client()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, fn: Callable[[], T]) -> T:
        """``fn`` under the retry policy; an SDK failure comes out as a comal error."""
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            return fn()

        with self._mapped(lambda: attempts):
            return self.retry.run(attempt)

    @contextmanager
    def _mapped(self, attempts: Callable[[], int] = lambda: 1) -> Iterator[None]:
        """Translate SDK exceptions raised inside the block (used around stream reading)."""
        try:
            yield
        except Exception as exc:
            mapped = map_sdk_error(exc, self.name, attempts())
            if mapped is None:
                raise
            raise mapped from exc

    def _response(
        self,
        message: Message,
        stop: Stop,
        raw_stop: str | None,
        raw_usage: Mapping[str, Any] | None,
        model: str,
        request_id: str | None,
    ) -> ModelResponse:
        return finish_response(
            message, stop, raw_stop, raw_usage, model, request_id, protocol=self.name
        )


def finish_response(
    message: Message,
    stop: Stop,
    raw_stop: str | None,
    raw_usage: Mapping[str, Any] | None,
    model: str,
    request_id: str | None,
    *,
    protocol: str,
    usage_protocol: str | None = None,
) -> ModelResponse:
    """A :class:`ModelResponse`, with the rules every protocol shares: a finished turn that
    proposes tool calls is ``tool_use`` (some OpenAI-compatible servers say ``stop``), and
    usage is normalized with ``unknown`` kept as ``None`` (TOK-1)."""
    if stop == "end_turn" and message.tool_calls:
        stop = "tool_use"
    usage = UNKNOWN_USAGE
    if raw_usage is not None:
        usage = normalize_usage(usage_protocol or protocol, raw_usage)
    return ModelResponse(
        message=message,
        stop=stop,
        usage=usage,
        raw_usage=raw_usage,
        model=model,
        request_id=request_id,
        raw_stop=raw_stop,
        provider=protocol,
    )


def with_refusal(message: Message, refusal: str | None) -> Message:
    """Keep a refusal's text when the message carries no other text (it is what the model said)."""
    if not refusal or any(isinstance(p, Text) and p.text for p in message.parts):
        return message
    return Message(Role.ASSISTANT, (*message.parts, Text(refusal)))
