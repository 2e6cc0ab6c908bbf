"""OpenAI Chat Completions streams: folded (:class:`ChatAccumulator`), spliced across recall
(:class:`ChatSplicer`) and written from a whole completion (:func:`chat_events`).

A stream is ``chat.completion.chunk`` objects as bare ``data:`` lines, choice 0's ``delta``
carrying ``content``, ``reasoning_content`` (DeepSeek) and ``tool_calls`` pieces, a chunk with
the ``finish_reason``, a usage chunk with no choices when the client asked for one
(``stream_options.include_usage``), and ``data: [DONE]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._events import Accumulator, Splicer, load, pieces, sse
from ._reply import Reply

__all__ = ["ChatAccumulator", "ChatSplicer", "chat_events"]


class ChatAccumulator(Accumulator):
    """``read``: the protocol's reader of a whole completion (the chunks make one)."""

    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__()
        self.read = read
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
        value = load(data)
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
        return self.read(body)


class ChatSplicer(Splicer):
    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__(ChatAccumulator(read))
        self.id: str | None = None
        self.finish_chunk: dict[str, Any] | None = None
        self.usage_chunk: dict[str, Any] | None = None

    def _start(self) -> None:
        self.finish_chunk = None

    def feed(self, event: str | None, data: str) -> bytes:
        if data.strip() == "[DONE]":
            return b""
        value = load(data)
        if not isinstance(value, dict):
            return b""
        if "error" in value:
            return self._emit(None, value)
        if self.id is None and isinstance(value.get("id"), str):
            self.id = value["id"]
        if self.id is not None:
            value = {**value, "id": self.id}
        if isinstance(value.get("usage"), dict):
            self.round_usage = dict(value["usage"])
        choices = value.get("choices") or []
        if not choices:
            self.usage_chunk = value
            return b""
        choice = choices[0]
        delta = dict(choice.get("delta") or {})
        if self.offered and (self.holding or delta.get("tool_calls")):
            self.holding = True
            self.held.append(("chunk", value))
            return b""
        if choice.get("finish_reason"):
            self.finish_chunk = value
            return b""
        if self.rounds > 1:
            delta.pop("role", None)
            if not delta or delta == {"content": ""}:
                return b""
            value = {**value, "choices": [{**choice, "delta": delta}]}
        return self._emit(None, value)

    def finish(self) -> bytes:
        out = [self._emit(None, value) for _, value in self.held]
        if self.finish_chunk is not None:
            out.append(self._emit(None, self.finish_chunk))
        if self.usage_chunk is not None or self.usage:
            chunk = dict(self.usage_chunk or {"id": self.id, "object": "chat.completion.chunk"})
            chunk |= {"choices": [], "usage": self.usage}
            out.append(self._emit(None, chunk))
        out.append(self._emit(None, "[DONE]"))
        return b"".join(out)


_STREAMED = frozenset({"role", "content", "reasoning_content", "tool_calls", "refusal"})


def _call_deltas(k: int, call: Mapping[str, Any], chunk: int | None) -> list[dict[str, Any]]:
    function = call.get("function")
    if call.get("type", "function") != "function" or not isinstance(function, Mapping):
        return [{"index": k, **call}]  # a custom tool call comes whole
    arguments = str(function.get("arguments") or "")
    first = {
        "index": k,
        "id": call.get("id"),
        "type": "function",
        "function": {"name": function.get("name"), "arguments": ""},
    }
    rest = [{"index": k, "function": {"arguments": p}} for p in pieces(arguments, chunk)]
    return [first, *rest]


def chat_events(
    whole: Mapping[str, Any], chunk: int | None, include_usage: bool = False
) -> Iterator[bytes]:
    """A whole completion as its chunks; the usage chunk only when the client asked for it."""
    head = {k: whole.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    (choice,) = whole["choices"]
    message: Mapping[str, Any] = choice["message"]

    def piece(delta: dict[str, Any], finish: str | None = None) -> bytes:
        step = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return sse(None, {**head, "choices": [step]})

    content = message.get("content")
    first = {"role": "assistant", "content": "" if isinstance(content, str | None) else content}
    # Keys with no delta of their own (a message's name) come whole in the first chunk.
    yield piece(first | {k: v for k, v in message.items() if k not in _STREAMED})
    for p in pieces(str(message.get("reasoning_content") or ""), chunk):
        yield piece({"reasoning_content": p})
    if isinstance(content, str):
        for p in pieces(content, chunk):
            yield piece({"content": p})
    for k, call in enumerate(message.get("tool_calls") or []):
        for delta in _call_deltas(k, call, chunk):
            yield piece({"tool_calls": [delta]})
    yield piece({}, choice.get("finish_reason"))
    if include_usage and "usage" in whole:
        yield sse(None, {**head, "choices": [], "usage": whole["usage"]})
    yield sse(None, "[DONE]")
