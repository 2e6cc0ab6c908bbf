"""OpenAI Responses streams: folded (:class:`ResponsesAccumulator`), spliced across recall
(:class:`ResponsesSplicer`) and written from a whole response (:func:`responses_events`).

A stream is numbered events (``sequence_number``): ``response.created``, per output item
``response.output_item.added``, its content or argument deltas and ``.done`` events, and
``response.output_item.done``; then ``response.completed`` or ``response.incomplete`` with the
whole response (some servers leave its ``output`` empty: the items are read from their events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._events import Accumulator, Splicer, load, pieces, sse
from ._reply import Reply

__all__ = ["ResponsesAccumulator", "ResponsesSplicer", "responses_events"]

_TERMINAL = ("response.completed", "response.incomplete")


class ResponsesAccumulator(Accumulator):
    """``read``: the protocol's reader of a whole response (the final event carries one)."""

    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__()
        self.read = read
        self.final: dict[str, Any] | None = None
        self.items: list[dict[str, Any]] = []

    def feed(self, event: str, data: str) -> None:
        self.events += 1
        value = load(data)
        if not isinstance(value, dict):
            return
        kind = value.get("type", event)
        if kind in _TERMINAL and isinstance(value.get("response"), dict):
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
        return self.read(final)

    def partial(self) -> dict[str, Any]:
        return {"events": self.events, "items": len(self.items)}


class ResponsesSplicer(Splicer):
    _FIRST = ("response.created", "response.in_progress", "response.queued")
    _CALLS = ("function_call", "custom_tool_call")

    def __init__(self, read: Callable[[Mapping[str, Any]], Reply]) -> None:
        super().__init__(ResponsesAccumulator(read))
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
        value = load(data)
        if not isinstance(value, dict):
            return b""
        kind = str(value.get("type", event))
        if kind in self._FIRST:
            if self.rounds > 1:
                return b""
            response = value.get("response") or {}
            self.response_id = self.response_id or response.get("id")
            return self._emit(kind, value)
        if kind in _TERMINAL:
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


def _item_events(
    event: Callable[..., bytes], index: int, item: Mapping[str, Any], chunk: int | None
) -> Iterator[bytes]:
    """One output item's events between ``added`` and ``done``: the text of its
    ``output_text`` parts, the arguments of a function call; another item comes whole."""
    ids = {"item_id": item.get("id"), "output_index": index}
    kind = item.get("type")
    if kind == "message":
        opened = {**item, "status": "in_progress", "content": []}
        yield event("response.output_item.added", output_index=index, item=opened)
        for j, part in enumerate(item.get("content") or []):
            if part.get("type") != "output_text":
                continue  # a refusal, an annotation-only part: whole in the item's done event
            text = part.get("text", "")
            yield event(
                "response.content_part.added", **ids, content_index=j, part=part | {"text": ""}
            )
            for p in pieces(text, chunk):
                yield event(
                    "response.output_text.delta", **ids, content_index=j, delta=p, logprobs=[]
                )
            yield event("response.output_text.done", **ids, content_index=j, text=text, logprobs=[])
            yield event("response.content_part.done", **ids, content_index=j, part=part)
    elif kind == "function_call":
        arguments = str(item.get("arguments", ""))
        opened = {**item, "status": "in_progress", "arguments": ""}
        yield event("response.output_item.added", output_index=index, item=opened)
        for p in pieces(arguments, chunk):
            yield event("response.function_call_arguments.delta", **ids, delta=p)
        yield event(
            "response.function_call_arguments.done",
            **ids,
            arguments=arguments,
            name=item.get("name"),
        )
    else:
        yield event("response.output_item.added", output_index=index, item=item)


def responses_events(
    whole: Mapping[str, Any], chunk: int | None, include_usage: bool = True
) -> Iterator[bytes]:
    """A whole response as its stream (whose final event always carries the usage)."""
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    pending = {**whole, "status": "in_progress", "output": [], "incomplete_details": None}
    pending.pop("usage", None)
    yield event("response.created", response=pending)
    for index, item in enumerate(whole.get("output") or []):
        yield from _item_events(event, index, item, chunk)
        yield event("response.output_item.done", output_index=index, item=item)
    end = "response.incomplete" if whole.get("status") == "incomplete" else "response.completed"
    yield event(end, response=whole)
