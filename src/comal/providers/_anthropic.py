"""Anthropic Messages API through the official ``anthropic`` SDK.

The request is built by :func:`~comal.messages.wire.to_anthropic` after the cache breakpoints are
placed (:mod:`._cache`); the answer is read back by
:func:`~comal.messages.wire.from_anthropic_message`. Nothing here writes message JSON by hand.

Request fields: ``max_tokens`` ← ``max_output_tokens``; ``system`` is a list of text blocks (the
request's ``system`` first, then any leading system messages) so it can carry a breakpoint;
``output_config.effort`` ← ``effort``. With the cache policy on, every message content is a list
of blocks (a lone text is not shortened to a string), so a message's bytes do not depend on
whether it carries the breakpoint this turn. The SDK no longer has a ``temperature`` argument, so a
temperature goes in the body through ``extra_body``.

Streaming uses ``client.messages.stream``. Tool input arrives as ``input_json_delta`` fragments;
they are forwarded to the caller unchanged and concatenated per block, and the complete text is
parsed with :func:`json.loads` — the parser the non-streaming path uses — so a streamed tool call
has exactly the arguments the same answer would have had whole. (The SDK's own snapshot parses
with jiter's partial mode, meant for previews.) Input cut off by ``max_tokens`` is not JSON; it is
kept as raw text (``{"_raw_arguments": text}`` on the wire), and the response is OUTPUT_LENGTH.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anthropic
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    ToolUseBlock,
)
from anthropic.types import TextDelta as SDKTextDelta

from ..messages.wire import (
    PROVIDER_ANTHROPIC,
    RAW_ARGUMENTS_KEY,
    from_anthropic_message,
)
from ._anthropic_params import anthropic_params
from ._base import DEFAULT_TIMEOUT, SDKProvider
from ._clients import anthropic_client
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

__all__ = ["AnthropicProvider", "anthropic_params"]  # the body, re-exported from its module


class AnthropicProvider(SDKProvider):
    """Claude through the Messages API. Give ``api_key`` (and optionally ``base_url``), or a
    ready ``client``; either way the SDK's own retries are turned off in favour of ``retry``."""

    name = PROVIDER_ANTHROPIC

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.Anthropic | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        super().__init__(retry or RetryPolicy(), owns_client=client is None)
        self.client = anthropic_client(
            client, api_key=api_key, base_url=base_url, timeout=timeout, provider=self.name
        )

    def _close_client(self) -> None:
        self.client.close()

    # -- request --------------------------------------------------------------------------------

    def params(self, req: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``client.messages.create`` for ``req`` (no I/O)."""
        return anthropic_params(req)

    def request(self, req: ModelRequest) -> ModelResponse:
        params = self.params(req)
        message = self._call(lambda: self.client.messages.create(**params))
        return self._read(message.to_dict(mode="json"), message._request_id)

    def stream(self, req: ModelRequest, on_event: OnEvent) -> ModelResponse:
        params = self.params(req)
        # Entering the manager sends the request; only that part is retried.
        stream = self._call(lambda: self.client.messages.stream(**params).__enter__())
        inputs: dict[int, list[str]] = {}  # content block index -> input_json fragments
        calls: dict[int, tuple[int, str]] = {}  # content block index -> (call index, call id)
        with self._mapped(), stream:
            for event in stream:
                if isinstance(event, RawContentBlockStartEvent):
                    block = event.content_block
                    if isinstance(block, ToolUseBlock):
                        calls[event.index] = (len(calls), block.id)
                        inputs[event.index] = []
                        on_event(ToolCallStart(len(calls) - 1, block.id, block.name))
                elif isinstance(event, RawContentBlockDeltaEvent):
                    delta = event.delta
                    if isinstance(delta, SDKTextDelta):
                        on_event(TextDelta(delta.text))
                    elif isinstance(delta, InputJSONDelta) and event.index in calls:
                        inputs[event.index].append(delta.partial_json)
                        if delta.partial_json:
                            index, call_id = calls[event.index]
                            on_event(ToolCallDelta(index, call_id, delta.partial_json))
            final = stream.get_final_message()
            request_id = stream.request_id
        data = final.to_dict(mode="json", warnings=False)
        content = data.get("content")
        if isinstance(content, list):
            for index, fragments in inputs.items():
                content[index]["input"] = _exact_input("".join(fragments))
        response = self._read(data, request_id)
        on_event(StreamDone(response))
        return response

    def _read(self, data: Mapping[str, Any], request_id: str | None) -> ModelResponse:
        message = from_anthropic_message({"content": data.get("content") or []})
        raw_stop = data.get("stop_reason")
        return self._response(
            message,
            normalize_stop(self.name, raw_stop),
            raw_stop,
            data.get("usage"),
            str(data.get("model") or ""),
            request_id,
        )


def _exact_input(text: str) -> object:
    """The tool input of a streamed block: the parsed JSON text, or the raw text when cut off."""
    if text == "":
        return {}  # a tool called without arguments streams no fragments
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}
