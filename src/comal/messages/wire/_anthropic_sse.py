"""Anthropic Messages streams: folded (:class:`AnthropicAccumulator`), spliced across recall
(:class:`AnthropicSplicer`) and written from a whole message (:func:`anthropic_events`).

The events are ``message_start``, per content block ``content_block_start``, its deltas
(``text_delta``, ``input_json_delta``, ``thinking_delta``, ``signature_delta``,
``citations_delta``) and ``content_block_stop``, then ``message_delta`` (stop reason, output
usage) and ``message_stop``; ``ping`` and ``error`` may come between them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._events import Accumulator, Splicer, load, pieces, sse
from ._reply import Reply

__all__ = ["AnthropicAccumulator", "AnthropicSplicer", "anthropic_events"]


class AnthropicAccumulator(Accumulator):
    """``read``: the protocol's reader of a whole response (the events make one)."""

    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__()
        self.read = read
        self.message: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.usage: dict[str, Any] = {}
        self.stop: str | None = None

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        value = load(data)
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
        return self.read(body)

    def partial(self) -> dict[str, Any]:
        return {"events": self.events, "blocks": len(self.blocks), "id": self.message.get("id")}


class AnthropicSplicer(Splicer):
    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__(AnthropicAccumulator(read))
        self.next_index = 0
        self.index: dict[int, int] = {}
        self.held_index: set[int] = set()
        self.started = False
        self.delta: dict[str, Any] | None = None

    def _start(self) -> None:
        self.index = {}
        self.held_index = set()

    def feed(self, event: str | None, data: str) -> bytes:
        value = load(data)
        if not isinstance(value, dict):
            return b""
        kind = str(value.get("type", event))
        if kind == "message_start":
            self.round_usage.update((value.get("message") or {}).get("usage") or {})
            if self.started:
                return b""
            self.started = True
            return self._emit(kind, value)
        if kind == "content_block_start":
            at = int(value.get("index", 0))
            block = value.get("content_block") or {}
            if self.offered and (self.holding or block.get("type") == "tool_use"):
                self.holding = True
                self.held_index.add(at)
                self.held.append((kind, value))
                return b""
            self.index[at] = self.next_index
            self.next_index += 1
            return self._emit(kind, {**value, "index": self.index[at]})
        if kind in ("content_block_delta", "content_block_stop"):
            at = int(value.get("index", 0))
            if at in self.held_index:
                self.held.append((kind, value))
                return b""
            return self._emit(kind, {**value, "index": self.index.get(at, at)})
        if kind == "message_delta":
            self.round_usage.update(value.get("usage") or {})
            self.delta = value
            return b""
        if kind == "message_stop":
            return b""
        return self._emit(kind, value)  # ping, error

    def finish(self) -> bytes:
        out: list[bytes] = []
        for kind, value in self.held:
            at = int(value.get("index", 0))
            if kind == "content_block_start":
                self.index[at] = self.next_index
                self.next_index += 1
            out.append(self._emit(kind, {**value, "index": self.index.get(at, at)}))
        delta = dict(self.delta or {"type": "message_delta", "delta": {"stop_reason": None}})
        delta["usage"] = {**(delta.get("usage") or {}), **self.usage}
        out.append(self._emit("message_delta", delta))
        out.append(self._emit("message_stop", {"type": "message_stop"}))
        return b"".join(out)


def _split(block: Mapping[str, Any], chunk: int | None) -> tuple[Any, list[dict[str, Any]]]:
    """A content block as its start event's block and the deltas that complete it. Only the
    shapes the deltas rebuild exactly are split; any other block comes whole in its start."""
    kind, keys = block.get("type"), set(block)
    if kind == "text" and keys == {"type", "text"}:
        texts = pieces(block["text"], chunk)
        return {**block, "text": ""}, [{"type": "text_delta", "text": p} for p in texts]
    if kind == "tool_use" and keys == {"type", "id", "name", "input"}:
        # JSON with the default ", " / ": " spacing, as the API streams it.
        partial = json.dumps(block["input"], ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(partial, chunk)]
        return {**block, "input": {}}, deltas
    if kind == "thinking" and keys <= {"type", "thinking", "signature"}:
        start: dict[str, Any] = {"type": "thinking", "thinking": ""}
        texts = pieces(block.get("thinking", ""), chunk)
        deltas = [{"type": "thinking_delta", "thinking": p} for p in texts]
        if "signature" in block:
            start["signature"] = ""
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return start, deltas
    return block, []  # redacted thinking, a block with citations, anything else: whole


def anthropic_events(
    whole: Mapping[str, Any], chunk: int | None, include_usage: bool = True
) -> Iterator[bytes]:
    """A whole message (the response body) as its stream (which always carries its usage)."""
    whole_usage = dict(whole.get("usage") or {})
    start = {**whole, "content": [], "stop_reason": None}
    start["usage"] = {k: v for k, v in whole_usage.items() if k != "output_tokens"}
    if "output_tokens" in whole_usage:
        start["usage"]["output_tokens"] = 1  # the API reports the first token at once
    yield sse("message_start", {"type": "message_start", "message": start})
    yield sse("ping", {"type": "ping"})
    for index, block in enumerate(whole.get("content") or []):
        first, deltas = _split(block, chunk)
        begin = {"type": "content_block_start", "index": index, "content_block": first}
        yield sse("content_block_start", begin)
        for delta in deltas:
            yield sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    stop = {"stop_reason": whole.get("stop_reason"), "stop_sequence": None}
    end_usage = {"output_tokens": whole_usage.get("output_tokens", 0)}
    yield sse("message_delta", {"type": "message_delta", "delta": stop, "usage": end_usage})
    yield sse("message_stop", {"type": "message_stop"})
