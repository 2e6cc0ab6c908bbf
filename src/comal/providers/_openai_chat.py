"""OpenAI Chat Completions through the official ``openai`` SDK — and any server that speaks it.

vLLM, Ollama, llama.cpp and other OpenAI-compatible servers are this adapter with a ``base_url``
(and usually ``max_tokens_param="max_tokens"``: OpenAI's reasoning models want
``max_completion_tokens``, older compatible servers only know ``max_tokens``).

Messages go through :func:`~comal.messages.wire.to_openai_chat` / ``from_openai_chat``; the system
prompt is sent as a leading ``system`` message. OpenAI caches prompt prefixes by itself, so with
the cache policy enabled the canonical hints are dropped rather than sent as ``cache_control``
(an OpenRouter extension that OpenAI rejects); with it disabled they are sent as they are.

Streaming reads the raw chunks of ``chat.completions.create(stream=True)`` and assembles them
here rather than with the SDK's ``.stream()`` helper, whose generic delta merge concatenates every
string it sees again: a server that repeats a tool call's ``id`` or ``name`` in each chunk
(several compatible servers do) would come out as ``call_1call_1``. Here a call's ``id`` and
``name`` are taken from the first chunk that has them and its ``arguments`` are the exact
concatenation of the fragments, which is the text a non-streaming answer would carry. A call
streamed without any ``id`` is given ``call_<n>`` (its position), as some local servers omit it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall

from ..messages.wire import PROVIDER_OPENAI_CHAT, from_openai_chat, to_openai_chat
from ._base import DEFAULT_TIMEOUT, SDKProvider, with_refusal
from ._cache import strip_hints, tool_params
from ._clients import openai_client
from ._errors import ProviderProtocolError
from ._retry import RetryPolicy
from ._stops import normalize_stop
from ._types import (
    ModelRequest,
    ModelResponse,
    OnEvent,
    StreamDone,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = ["OpenAIChatProvider"]


class OpenAIChatProvider(SDKProvider):
    """A model behind the Chat Completions API. Give ``api_key`` and optionally ``base_url``, or
    a ready ``client``; the SDK's own retries are turned off in favour of ``retry``.
    ``stream_usage`` asks for the final usage chunk (``stream_options.include_usage``)."""

    name = PROVIDER_OPENAI_CHAT

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.OpenAI | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens_param: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        stream_usage: bool = True,
    ) -> None:
        super().__init__(retry or RetryPolicy(), owns_client=client is None)
        self.client = openai_client(
            client, api_key=api_key, base_url=base_url, timeout=timeout, provider=self.name
        )
        self.max_tokens_param = max_tokens_param
        self.stream_usage = stream_usage

    def _close_client(self) -> None:
        self.client.close()

    def params(self, req: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``client.chat.completions.create`` for ``req`` (no I/O)."""
        messages = strip_hints(req.messages) if req.cache.enabled else list(req.messages)
        wire: list[Any] = list(to_openai_chat(messages))
        if req.system:
            wire.insert(0, {"role": "system", "content": req.system})
        params: dict[str, Any] = {
            "model": req.model,
            "messages": wire,
            self.max_tokens_param: req.max_output_tokens,
        }
        if req.tools:
            params["tools"] = [
                {"type": "function", "function": tool}
                for tool in tool_params(req.tools, None, "parameters")
            ]
        if req.effort is not None:
            params["reasoning_effort"] = req.effort
        if req.temperature is not None:
            params["temperature"] = req.temperature
        return params

    def request(self, req: ModelRequest) -> ModelResponse:
        params = self.params(req)
        completion = self._call(lambda: self.client.chat.completions.create(**params))
        if not completion.choices:
            raise ProviderProtocolError(
                f"{self.name} answered without choices; check that the server speaks Chat "
                "Completions",
                provider=self.name,
                request_id=completion._request_id,
            )
        choice = completion.choices[0]
        usage = completion.usage.to_dict(mode="json") if completion.usage is not None else None
        return self._read(
            choice.message.to_dict(mode="json"),
            choice.finish_reason,
            usage,
            completion.model,
            completion._request_id,
        )

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        params = {**self.params(req), "stream": True}
        if self.stream_usage:
            params["stream_options"] = {"include_usage": True}
        stream = self._call(lambda: self.client.chat.completions.create(**params))
        state = _ChatStream(on_event)
        with self._mapped(), stream:
            for chunk in stream:
                state.add(chunk)
        response = self._read(
            state.message(),
            state.finish,
            state.usage,
            state.model,
            stream.response.headers.get("x-request-id"),
        )
        on_event(StreamDone(response))
        return response

    def _read(
        self,
        data: Mapping[str, Any],
        finish: str | None,
        usage: Mapping[str, Any] | None,
        model: str,
        request_id: str | None,
    ) -> ModelResponse:
        refusal = data.get("refusal")
        message = from_openai_chat([data])[0]
        stop = normalize_stop(self.name, finish)
        if isinstance(refusal, str) and refusal:
            message = with_refusal(message, refusal)
            stop = "refusal"
        return self._response(message, stop, finish, usage, model, request_id)


@dataclass
class _Call:
    position: int
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class _ChatStream:
    """Chunks of one streamed completion (choice 0) folded into an assistant message."""

    def __init__(self, on_event: OnEvent) -> None:
        self.on_event = on_event
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _Call] = {}  # wire index -> call, in order of first appearance
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model = ""

    def add(self, chunk: ChatCompletionChunk) -> None:
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = chunk.usage.to_dict(mode="json")
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                self.on_event(TextDelta(delta.content))
            reasoning = (delta.model_extra or {}).get("reasoning_content")
            if isinstance(reasoning, str):
                self.reasoning.append(reasoning)
            if delta.refusal:
                self.refusal.append(delta.refusal)
            for call_delta in delta.tool_calls or ():
                self._tool_call(call_delta)
            if choice.finish_reason is not None:
                self.finish = choice.finish_reason

    def _tool_call(self, delta: ChoiceDeltaToolCall) -> None:
        call = self.calls.get(delta.index)
        function = delta.function
        if call is None:
            position = len(self.calls)
            name = function.name if function is not None and function.name else ""
            call = _Call(position, delta.id or f"call_{position}", name)
            self.calls[delta.index] = call
            self.on_event(ToolCallStart(position, call.id, call.name))
        elif function is not None and function.name and not call.name:
            call.name = function.name
        if function is not None and function.arguments:
            call.arguments.append(function.arguments)
            self.on_event(ToolCallDelta(call.position, call.id, function.arguments))

    def message(self) -> dict[str, Any]:
        """The assembled message in the non-streaming ``message`` shape."""
        text = "".join(self.text)
        out: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.reasoning:
            out["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            out["refusal"] = "".join(self.refusal)
        if self.calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for call in sorted(self.calls.values(), key=lambda c: c.position)
            ]
        return out
