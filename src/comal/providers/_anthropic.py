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
    AnthropicBlock,
    AnthropicMessage,
    from_anthropic_message,
    to_anthropic,
)
from ._base import DEFAULT_TIMEOUT, SDKProvider
from ._cache import cache_control, mark_history, tool_params
from ._clients import anthropic_client
from ._retry import RetryPolicy
from ._stops import normalize_stop
from ._types import (
    CachePolicy,
    ModelRequest,
    ModelResponse,
    OnEvent,
    StreamDone,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)

__all__ = ["AnthropicProvider", "anthropic_params"]


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


def anthropic_params(req: ModelRequest) -> dict[str, Any]:
    """The Messages API body for ``req``, exactly as :class:`AnthropicProvider` sends it (no
    I/O; ``comal replay --dump`` writes it too)."""
    policy = req.cache
    messages = mark_history(req.messages, policy) if policy.enabled else list(req.messages)
    wire = to_anthropic(messages)
    if policy.enabled:
        _as_blocks(wire["messages"])
    params: dict[str, Any] = {
        "model": req.model,
        "max_tokens": req.max_output_tokens,
        "messages": wire["messages"],
    }
    system = _system(req.system, wire.get("system"), policy)
    if system is not None:
        params["system"] = system
    if req.tools:
        hint = policy.hint if policy.enabled else None
        params["tools"] = tool_params(req.tools, hint, "input_schema")
    if req.effort is not None:
        params["output_config"] = {"effort": req.effort}
    if req.temperature is not None:
        params["extra_body"] = {"temperature": req.temperature}
    return params


def _as_blocks(messages: list[AnthropicMessage]) -> None:
    """Send string contents as one text block. The converter writes a lone uncached text as a
    string and a marked one as a block, so without this a message's bytes would change when the
    breakpoint moves past it — and the cached prefix with them."""
    for message in messages:
        content = message["content"]
        if isinstance(content, str) and content:
            message["content"] = [AnthropicBlock(type="text", text=content)]


def _exact_input(text: str) -> object:
    """The tool input of a streamed block: the parsed JSON text, or the raw text when cut off."""
    if text == "":
        return {}  # a tool called without arguments streams no fragments
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


def _system(text: str, extra: object, policy: CachePolicy) -> str | list[dict[str, Any]] | None:
    """The ``system`` parameter: ``text`` then any leading system messages, marked last."""
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    if isinstance(extra, str):
        if extra:
            blocks.append({"type": "text", "text": extra})
    elif isinstance(extra, list):
        blocks.extend(dict(block) for block in extra)
    if not blocks:
        return None
    if policy.enabled:
        blocks[-1]["cache_control"] = cache_control(policy.hint)
    elif len(blocks) == 1 and "cache_control" not in blocks[0]:
        return text or str(blocks[0]["text"])  # a plain string, exactly as the caller gave it
    return blocks
