"""Reassembling a streamed reply from its server-sent events, one event at a time.

The proxy forwards every byte of an upstream stream as it arrives and, beside it, feeds each
parsed event (``httpx_sse`` does the parsing) to an accumulator for the route's format. Only a
stream that reached its terminal event (Anthropic ``message_stop``, Chat ``[DONE]``, Responses
``response.completed`` / ``.incomplete``) yields a :class:`~comal.serve._wire.Reply`; anything
else is an interrupted response, recorded as an event and never as a half message.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from ._wire import Protocol, Reply, parse_reply

__all__ = ["Accumulator", "accumulator"]


class Accumulator(ABC):
    """Folds events into a whole response; :attr:`done` once the terminal event came."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.done = False
        self.error: dict[str, Any] | None = None
        self.events = 0

    @abstractmethod
    def feed(self, event: str, data: str) -> None:
        """Take one upstream event (each subclass counts it in ``events``)."""

    @abstractmethod
    def reply(self) -> Reply:
        """The whole reply the events so far make."""

    def partial(self) -> dict[str, Any]:
        """What arrived before the stream broke, for the interrupted-response event."""
        return {"events": self.events}


def _load(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


class _Anthropic(Accumulator):
    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        value = _load(data)
        if not isinstance(value, dict):
            return
        kind = value.get("type", event)
        if kind == "message_start":
            self.message = dict(value.get("message") or {})
            self.usage.update(self.message.get("usage") or {})
        elif kind == "content_block_start":
            index = int(value.get("index", len(self.blocks)))
            self.blocks[index] = dict(value.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(int(value.get("index", 0)), value.get("delta") or {})
        elif kind == "message_delta":
            delta = value.get("delta") or {}
            self.stop = delta.get("stop_reason", self.stop)
            self.usage.update(value.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            self.error = value

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def _content(self) -> list[dict[str, Any]]:
        content = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if block.get("type") in ("tool_use", "server_tool_use"):
                text = "".join(self.json_parts.get(index, []))
                block["input"] = json.loads(text) if text.strip() else block.get("input") or {}
            if block.get("type") == "thinking" and not block.get("signature"):
                block.pop("signature", None)
            content.append(block)
        return content

    def reply(self) -> Reply:
        body = {**self.message, "content": self._content(), "usage": self.usage}
        body["stop_reason"] = self.stop
        return parse_reply("anthropic", body)

    def partial(self) -> dict[str, Any]:
        return {"events": self.events, "blocks": len(self.blocks), "id": self.message.get("id")}


class _Chat(Accumulator):
    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.head: dict[str, Any] = {}
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.has_content = False

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        if data.strip() == "[DONE]":
            self.done = True
            return
        value = _load(data)
        if not isinstance(value, dict):
            return
        if "error" in value:
            self.error = value
            return
        self.head = {k: value[k] for k in ("id", "model") if k in value} or self.head
        if isinstance(value.get("usage"), dict):
            self.usage = value["usage"]
        for choice in value.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content") is not None:
                self.has_content = True
                self.text.append(delta["content"])
            if delta.get("reasoning_content"):
                self.reasoning.append(delta["reasoning_content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    int(call.get("index", 0)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                slot["function"]["name"] += function.get("name") or ""
                slot["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def reply(self) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if self.has_content and "".join(self.text):
            message["content"] = "".join(self.text)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [self.calls[k] for k in sorted(self.calls)]
        body = {**self.head, "choices": [{"message": message, "finish_reason": self.finish}]}
        if self.usage is not None:
            body["usage"] = self.usage
        return parse_reply("openai_chat", body)


class _Responses(Accumulator):
    _TERMINAL = ("response.completed", "response.incomplete")

    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.final: dict[str, Any] | None = None
        self.items: list[dict[str, Any]] = []

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        value = _load(data)
        if not isinstance(value, dict):
            return
        kind = value.get("type", event)
        if kind in self._TERMINAL and isinstance(value.get("response"), dict):
            self.final = value["response"]
            self.done = True
        elif kind == "response.output_item.done" and isinstance(value.get("item"), dict):
            self.items.append(value["item"])
        elif kind in ("response.failed", "error"):
            self.error = value

    def reply(self) -> Reply:
        final = dict(self.final or {})
        if not final.get("output"):
            final["output"] = self.items  # some servers send the items only as events
        return parse_reply("openai_responses", final)

    def partial(self) -> dict[str, Any]:
        return {"events": self.events, "items": len(self.items)}


def accumulator(protocol: Protocol) -> Accumulator:
    if protocol == "anthropic":
        return _Anthropic(protocol)
    if protocol == "openai_chat":
        return _Chat(protocol)
    return _Responses(protocol)
