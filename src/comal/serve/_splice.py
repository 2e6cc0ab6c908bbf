"""One client stream from several upstream replies: streaming a turn that offers recall.

When the proxy offers recall tools upstream, the reply still streams to the client as it comes.
A :class:`Splicer` turns each upstream event into what the client gets:

- Text, thinking and other content go through at once, under client-side numbers: Anthropic
  content block indices, Responses ``output_index`` and ``sequence_number`` count across the
  whole client stream; the message (Anthropic ``message_start``, Responses
  ``response.created``, the Chat chunk ``id``) is the first upstream reply's.
- From the first tool call of a round on (a recall call or the client's own: which one comes
  next is not known yet), everything is held. When the round's reply ends with a recall call
  the held events are dropped (the proxy runs the call and asks again: that round is recorded
  as a recall step the client never sees); otherwise they are flushed in order.
- The terminal events (Anthropic ``message_delta`` + ``message_stop``, Responses
  ``response.completed``, Chat's finish chunk, usage chunk and ``[DONE]``) are sent once, after
  the last round.

**Usage.** The final ``message_delta`` (Anthropic), ``response.completed`` (Responses) and
usage chunk (Chat, when the client asked for one) report the *sum over every upstream call of
the turn*: input, cache and output tokens of the recall rounds and the last one, what the
client is billed for. (Anthropic's ``message_start`` carries the first round's numbers, as it
is sent before any other round exists.) The ledger keeps each round's own usage on its request
record.

The client's view of the message (what the client will send back) is rebuilt from the events
it was sent, with the route's accumulator: :meth:`Splicer.shown`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from ..messages import Message
from ._stream import accumulator
from ._wire import Protocol

__all__ = ["Splicer", "splicer"]


def _load(data: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _sum(into: dict[str, Any], usage: Any) -> None:
    """Add ``usage``'s integers into ``into`` (nested detail objects too)."""
    if not isinstance(usage, dict):
        return
    for key, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            into[key] = int(into.get(key) or 0) + value
        elif isinstance(value, dict):
            inner = into.get(key)
            if not isinstance(inner, dict):
                inner = {}
                into[key] = inner
            _sum(inner, value)


class Splicer(ABC):
    """Upstream events of successive rounds in, client bytes out (see the module docstring)."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.client = accumulator(protocol)
        self.rounds = 0
        self.offered: frozenset[str] = frozenset()
        self.holding = False
        self.held: list[tuple[str, dict[str, Any]]] = []
        self.usage: dict[str, Any] = {}
        self.round_usage: dict[str, Any] = {}

    def start(self, offered: frozenset[str]) -> None:
        """A new upstream reply begins; ``offered``: the recall tools its request offered."""
        self.rounds += 1
        self.offered = offered
        self.holding = False
        self.held = []
        self.round_usage = {}
        self._start()

    def _start(self) -> None:  # noqa: B027 - an optional hook: most routes keep no per-round state
        """A route's own reset when a round begins."""

    def end(self) -> None:
        """The round's reply ended (its usage counts toward the sum)."""
        _sum(self.usage, self.round_usage)

    def drop(self) -> None:
        """The round ended in a recall: what was held is not the client's."""
        self.held = []

    @abstractmethod
    def feed(self, event: str | None, data: str) -> bytes:
        """One upstream event in; the bytes the client gets now (held events give none)."""

    @abstractmethod
    def finish(self) -> bytes:
        """The held events of the last round and the terminal events."""

    def shown(self) -> Message | None:
        """The message the client was sent (``None``: it could not be read)."""
        try:
            reply = self.client.reply()
        except Exception:  # the client's copy is the proxy's own output: never fatal here
            return None
        return reply.message

    def _emit(self, kind: str | None, value: dict[str, Any] | str) -> bytes:
        data = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        self.client.feed(kind or "", data)
        if kind is None:
            return f"data: {data}\n\n".encode()
        return f"event: {kind}\ndata: {data}\n\n".encode()


class _Anthropic(Splicer):
    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.next_index = 0
        self.index: dict[int, int] = {}
        self.held_index: set[int] = set()
        self.started = False
        self.delta: dict[str, Any] | None = None

    def _start(self) -> None:
        self.index = {}
        self.held_index = set()

    def feed(self, event: str | None, data: str) -> bytes:
        value = _load(data)
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


class _Chat(Splicer):
    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.id: str | None = None
        self.finish_chunk: dict[str, Any] | None = None
        self.usage_chunk: dict[str, Any] | None = None

    def _start(self) -> None:
        self.finish_chunk = None

    def feed(self, event: str | None, data: str) -> bytes:
        if data.strip() == "[DONE]":
            return b""
        value = _load(data)
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


class _Responses(Splicer):
    _FIRST = ("response.created", "response.in_progress", "response.queued")
    _TERMINAL = ("response.completed", "response.incomplete")
    _CALLS = ("function_call", "custom_tool_call")

    def __init__(self, protocol: Protocol) -> None:
        super().__init__(protocol)
        self.seq = 0
        self.next_index = 0
        self.index: dict[int, int] = {}
        self.held_index: set[int] = set()
        self.response_id: str | None = None
        self.final: dict[str, Any] | None = None
        self.items: dict[int, Any] = {}

    def _start(self) -> None:
        self.index = {}
        self.held_index = set()

    def _emit(self, kind: str | None, value: dict[str, Any] | str) -> bytes:
        assert isinstance(value, dict)
        value = {**value, "sequence_number": self.seq}
        self.seq += 1
        if kind == "response.output_item.done":
            self.items[int(value.get("output_index", 0))] = value.get("item")
        return super()._emit(kind, value)

    def feed(self, event: str | None, data: str) -> bytes:
        value = _load(data)
        if not isinstance(value, dict):
            return b""
        kind = str(value.get("type", event))
        if kind in self._FIRST:
            if self.rounds > 1:
                return b""
            response = value.get("response") or {}
            self.response_id = self.response_id or response.get("id")
            return self._emit(kind, value)
        if kind in self._TERMINAL:
            self.final = value
            self.round_usage = dict((value.get("response") or {}).get("usage") or {})
            return b""
        if "output_index" not in value:
            return self._emit(kind, value)  # error, response.failed, ...
        at = int(value["output_index"])
        if kind == "response.output_item.added":
            item = value.get("item") or {}
            if self.offered and (self.holding or item.get("type") in self._CALLS):
                self.holding = True
                self.held_index.add(at)
                self.held.append((kind, value))
                return b""
            self.index[at] = self.next_index
            self.next_index += 1
        elif at in self.held_index:
            self.held.append((kind, value))
            return b""
        return self._emit(kind, {**value, "output_index": self.index.get(at, at)})

    def finish(self) -> bytes:
        out: list[bytes] = []
        for kind, value in self.held:
            at = int(value["output_index"])
            if kind == "response.output_item.added":
                self.index[at] = self.next_index
                self.next_index += 1
            out.append(self._emit(kind, {**value, "output_index": self.index.get(at, at)}))
        final = dict(self.final or {"type": "response.completed"})
        response = dict(final.get("response") or {})
        if self.response_id is not None:
            response["id"] = self.response_id
        response["output"] = [self.items[k] for k in sorted(self.items)]
        if self.usage:
            response["usage"] = self.usage
        final["response"] = response
        out.append(self._emit(str(final.get("type", "response.completed")), final))
        return b"".join(out)


def splicer(protocol: Protocol) -> Splicer:
    if protocol == "anthropic":
        return _Anthropic(protocol)
    if protocol == "openai_chat":
        return _Chat(protocol)
    return _Responses(protocol)
