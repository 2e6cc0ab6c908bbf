"""The provider seam: one request in, one response out, optionally streamed.

A :class:`ModelRequest` is everything a model call needs, in canonical form; a
:class:`ModelResponse` is the canonical assistant message plus a normalized stop reason and usage.
Adapters translate both ways with the lossless converters of :mod:`comal.messages.wire`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, Required, TypeAlias, TypedDict, runtime_checkable

from ..errors import UserError
from ..messages import CacheHint, Message, Text, ToolCall
from ..messages.wire import CONTEXT_LENGTH, OUTPUT_LENGTH, Stop
from ..tokens import Usage

__all__ = [
    "CONTEXT_LENGTH",
    "OUTPUT_LENGTH",
    "CachePolicy",
    "ModelRequest",
    "ModelResponse",
    "OnEvent",
    "Provider",
    "Stop",
    "StreamDone",
    "StreamEvent",
    "StreamingProvider",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "ToolSpec",
    "call_model",
    "replay_events",
]

# OUT-1: ``Stop`` and the two length outcomes are values of the wire layer (each protocol's
# ``stop`` normalizes into them), re-exported for the provider seam.
_INCOMPLETE: Final = frozenset({OUTPUT_LENGTH, CONTEXT_LENGTH, "error"})


class ToolSpec(TypedDict, total=False):
    """A tool the model may call: plain JSON, the same for every provider."""

    name: Required[str]
    description: str
    input_schema: Required[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """Where prompt-cache breakpoints go (CCH-1).

    ``enabled`` (the default) hands placement to the provider adapter: hints already on canonical
    parts are dropped and Anthropic gets ``cache_control`` on the last tool, on the system prompt
    and on the last message of the stable history prefix — three breakpoints, under Anthropic's
    limit of four. OpenAI caches prefixes automatically and gets no markers. ``stable_messages``
    is the number of leading messages that the next request will repeat unchanged; ``None``
    means all of them (the whole conversation so far is the prefix of the next turn). Disabled,
    the hints on canonical parts are sent as they are and nothing is added.
    """

    enabled: bool = True
    stable_messages: int | None = None
    ttl: str | None = None  # "5m" | "1h"; None is the provider's default

    @classmethod
    def off(cls) -> CachePolicy:
        return cls(enabled=False)

    @property
    def hint(self) -> CacheHint:
        return CacheHint("ephemeral", self.ttl)


@dataclass(frozen=True)
class ModelRequest:
    """One model call. ``messages`` are canonical and hold the conversation without the system
    prompt, which is ``system``; ``tools`` are :class:`ToolSpec` dicts."""

    model: str
    messages: Sequence[Message] = ()
    system: str = ""
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int = 4096
    effort: str | None = None
    cache: CachePolicy = field(default_factory=CachePolicy)
    temperature: float | None = None

    def __post_init__(self) -> None:
        # Tuples keep a request a value: an adapter cannot see a list change under it.
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        if not self.model:
            raise UserError("ModelRequest.model is empty; name the model, e.g. 'claude-sonnet-4-6'")
        if self.max_output_tokens <= 0:
            raise UserError(
                f"max_output_tokens must be positive, got {self.max_output_tokens}; "
                "reserve output tokens from the budget"
            )
        for i, tool in enumerate(self.tools):
            if not isinstance(tool, Mapping) or "name" not in tool or "input_schema" not in tool:
                raise UserError(
                    f"tools[{i}] is not a tool spec; give a dict with 'name', 'description' and "
                    "'input_schema'"
                )


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """What a provider answered: the assistant message, why it stopped, what it cost."""

    message: Message
    stop: Stop
    usage: Usage
    raw_usage: Mapping[str, Any] | None = None
    model: str = ""
    request_id: str | None = None
    raw_stop: str | None = None
    provider: str = ""

    @property
    def incomplete(self) -> bool:
        """The response did not finish (OUT-2): its tool calls must not run."""
        return self.stop in _INCOMPLETE

    @property
    def runnable_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the house may judge: none when the response is incomplete (OUT-2)."""
        return () if self.incomplete else self.message.tool_calls


# -- streaming ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """A tool call begins. ``index`` counts the response's tool calls from 0."""

    index: int
    call_id: str
    name: str
    kind: Literal["tool_call_start"] = field(default="tool_call_start", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call's argument text exactly as the provider streamed it."""

    index: int
    call_id: str
    arguments: str
    kind: Literal["tool_call_delta"] = field(default="tool_call_delta", init=False)


@dataclass(frozen=True, slots=True)
class StreamDone:
    response: ModelResponse
    kind: Literal["done"] = field(default="done", init=False)


StreamEvent: TypeAlias = TextDelta | ToolCallStart | ToolCallDelta | StreamDone
OnEvent: TypeAlias = Callable[[StreamEvent], None]


@runtime_checkable
class Provider(Protocol):
    """The one-method seam every model sits behind."""

    def request(self, req: ModelRequest) -> ModelResponse: ...


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream; ``stream`` returns what ``request`` would have."""

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse: ...


def replay_events(response: ModelResponse, on_event: OnEvent) -> None:
    """Emit the events a stream of ``response`` would have produced, one delta per part."""
    index = 0
    for part in response.message.parts:
        if isinstance(part, Text) and part.text:
            on_event(TextDelta(part.text))
        elif isinstance(part, ToolCall):
            on_event(ToolCallStart(index, part.id, part.name))
            if part.arguments:
                on_event(ToolCallDelta(index, part.id, part.arguments))
            index += 1
    on_event(StreamDone(response))


def call_model(
    provider: Provider, req: ModelRequest, on_event: OnEvent | None = None
) -> ModelResponse:
    """Call ``provider``, streaming into ``on_event`` when given; a provider that cannot stream
    answers whole and its response is replayed as events."""
    if on_event is None:
        return provider.request(req)
    if isinstance(provider, StreamingProvider):
        return provider.stream(req, on_event)
    response = provider.request(req)
    replay_events(response, on_event)
    return response
