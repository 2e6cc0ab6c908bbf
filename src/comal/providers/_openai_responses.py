"""OpenAI Responses API through the official ``openai`` SDK.

Stateless by design: every request carries the whole input (``store=False``) and reasoning comes
back as ``encrypted_content`` (``include=["reasoning.encrypted_content"]``) so the ledger can
send it back next turn. Models without reasoning reject that ``include``; construct the adapter
with ``encrypted_reasoning=False`` for them.

Input goes through :func:`~comal.messages.wire.to_openai_responses`, the system prompt as
``instructions``; output items come back through ``from_openai_responses``. Function tools are
sent with ``strict: false`` because the API's default is strict, which would reject ordinary
JSON schemas. ``refusal`` content parts are read as text and the stop becomes ``refusal``.

Stop: ``completed`` is ``end_turn`` (``tool_use`` with function calls); ``incomplete`` for
``max_output_tokens`` is OUTPUT_LENGTH; ``failed`` is ``error``, or raises ContextLength when the
error says the input was too long.

Streaming reads the events of ``responses.create(stream=True)``: text and argument deltas are
forwarded as they come, and the message is read from the final ``response.completed`` /
``response.incomplete`` / ``response.failed`` event's full response — the same object a
non-streaming call returns, so both paths read identically.
"""

from __future__ import annotations

from typing import Any

import openai
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseTextDeltaEvent,
)

from ..messages import Message, Part, Role
from ..messages.wire import PROVIDER_OPENAI_RESPONSES, from_openai_responses, to_openai_responses
from ._base import DEFAULT_TIMEOUT, SDKProvider
from ._cache import strip_hints, tool_params
from ._clients import openai_client
from ._errors import ProviderProtocolError, error_for_status
from ._retry import RetryPolicy
from ._stops import normalize_stop
from ._types import (
    ModelRequest,
    ModelResponse,
    OnEvent,
    Stop,
    StreamDone,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = ["OpenAIResponsesProvider"]

_FINAL_EVENTS = (ResponseCompletedEvent, ResponseIncompleteEvent, ResponseFailedEvent)


class OpenAIResponsesProvider(SDKProvider):
    """A model behind the Responses API. Give ``api_key`` and optionally ``base_url``, or a
    ready ``client``; the SDK's own retries are turned off in favour of ``retry``."""

    name = PROVIDER_OPENAI_RESPONSES

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: openai.OpenAI | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        encrypted_reasoning: bool = True,
    ) -> None:
        super().__init__(retry or RetryPolicy(), owns_client=client is None)
        self.client = openai_client(
            client, api_key=api_key, base_url=base_url, timeout=timeout, provider=self.name
        )
        self.encrypted_reasoning = encrypted_reasoning

    def _close_client(self) -> None:
        self.client.close()

    def params(self, req: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``client.responses.create`` for ``req`` (no I/O)."""
        messages = strip_hints(req.messages) if req.cache.enabled else list(req.messages)
        params: dict[str, Any] = {
            "model": req.model,
            "input": list(to_openai_responses(messages)),
            "max_output_tokens": req.max_output_tokens,
            "store": False,
        }
        if req.system:
            params["instructions"] = req.system
        if req.tools:
            params["tools"] = [
                {"type": "function", **tool, "strict": False}
                for tool in tool_params(req.tools, None, "parameters")
            ]
        if self.encrypted_reasoning:
            params["include"] = ["reasoning.encrypted_content"]
        if req.effort is not None:
            params["reasoning"] = {"effort": req.effort}
        if req.temperature is not None:
            params["temperature"] = req.temperature
        return params

    def request(self, req: ModelRequest) -> ModelResponse:
        params = self.params(req)
        response = self._call(lambda: self.client.responses.create(**params))
        return self._read(response, response._request_id)

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        params = {**self.params(req), "stream": True}
        stream = self._call(lambda: self.client.responses.create(**params))
        calls: dict[str, tuple[int, str]] = {}  # output item id -> (call index, call id)
        final: Response | None = None
        with self._mapped(), stream:
            for event in stream:
                if isinstance(event, ResponseTextDeltaEvent):
                    on_event(TextDelta(event.delta))
                elif isinstance(event, ResponseOutputItemAddedEvent):
                    item = event.item
                    if isinstance(item, ResponseFunctionToolCall):
                        calls[item.id or item.call_id] = (len(calls), item.call_id)
                        on_event(ToolCallStart(len(calls) - 1, item.call_id, item.name))
                elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
                    index, call_id = calls.get(event.item_id, (event.output_index, ""))
                    on_event(ToolCallDelta(index, call_id, event.delta))
                elif isinstance(event, ResponseErrorEvent):
                    body = {"code": event.code, "message": event.message, "type": "error"}
                    raise error_for_status(None, body, provider=self.name)
                elif isinstance(event, _FINAL_EVENTS):
                    final = event.response
            request_id = stream.response.headers.get("x-request-id")
        if final is None:
            raise ProviderProtocolError(
                f"the {self.name} stream ended before the response was complete; try again",
                provider=self.name,
                request_id=request_id,
            )
        response = self._read(final, request_id)
        on_event(StreamDone(response))
        return response

    def _read(self, response: Response, request_id: str | None) -> ModelResponse:
        if response.status == "failed" and response.error is not None:
            error = response.error.to_dict(mode="json")
            if error.get("code") == "context_length_exceeded":
                raise error_for_status(None, error, provider=self.name, request_id=request_id)
        refused = False
        items: list[dict[str, Any]] = []
        for item in response.output:
            data = item.to_dict(mode="json")
            if data.get("type") == "message":
                content = data.get("content")
                parts_in = content if isinstance(content, list) else []
                data["content"], was_refusal = _refusal_as_text(parts_in)
                refused = refused or was_refusal
            items.append(data)
        parts: list[Part] = []
        for msg in from_openai_responses(items):
            parts.extend(msg.parts)
        detail = response.incomplete_details.reason if response.incomplete_details else None
        raw_stop = response.status
        stop: Stop = "refusal" if refused else normalize_stop(self.name, raw_stop, detail)
        usage = response.usage.to_dict(mode="json") if response.usage is not None else None
        return self._response(
            Message(Role.ASSISTANT, tuple(parts)),
            stop,
            raw_stop if detail is None else f"{raw_stop}:{detail}",
            usage,
            response.model,
            request_id,
        )


def _refusal_as_text(content: list[Any]) -> tuple[list[Any], bool]:
    """Content parts with ``refusal`` parts read as ``output_text`` (the model's own words)."""
    out: list[Any] = []
    refused = False
    for part in content:
        if isinstance(part, dict) and part.get("type") == "refusal":
            out.append({"type": "output_text", "text": part.get("refusal", "")})
            refused = True
        else:
            out.append(part)
    return out, refused
