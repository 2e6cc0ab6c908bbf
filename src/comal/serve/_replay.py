"""A stored reply given again, in the client's format: what a retried request gets.

A client retries a request it got no answer to (its connection broke, ``comal serve`` was
killed) with the same bytes. When the ledger already holds the reply to that very request
(:meth:`~comal.serve._sessions.SessionRouter.answered`), the proxy does not call upstream again:
a second reply would be a second step the client never asked for, and storing it would put the
conversation in the ledger twice. The stored reply is rendered back instead, whole or as a
stream, from the stored message and its request record (the upstream's id, model, stop reason
and usage): the message the client gets is the one stored, so the conversation it sends next
continues the same session. Only the framing is rebuilt; a stream comes as one event per block.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ..ledger import RequestRecord
from ..messages import Message
from ..messages.wire import to_anthropic, to_openai_chat, to_openai_responses
from ._wire import Protocol

__all__ = ["Stored", "replay_body"]


@dataclass(frozen=True, slots=True)
class Stored:
    """A reply as the ledger keeps it: the message the client was given and the request
    record of the call that produced it."""

    message: Message
    record: RequestRecord | None
    model: str

    @property
    def response_id(self) -> str:
        rid = self.record.meta.get("response_id") if self.record is not None else None
        return rid if isinstance(rid, str) else "comal_replay"

    @property
    def stop(self) -> str | None:
        stop = self.record.meta.get("stop") if self.record is not None else None
        return stop if isinstance(stop, str) else None

    def tokens(self, name: str) -> int:
        value = getattr(self.record, name, None) if self.record is not None else None
        return value if isinstance(value, int) else 0


def replay_body(
    protocol: Protocol, stored: Stored, *, stream: bool, include_usage: bool = False
) -> bytes | AsyncIterator[bytes]:
    """The body a client of ``protocol`` gets for ``stored``."""
    if not stream:
        return json.dumps(_whole(protocol, stored), ensure_ascii=False).encode()
    events = _events(protocol, stored, include_usage)

    async def body() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    return body()


def _sse(kind: str | None, value: Any) -> bytes:
    data = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return (f"event: {kind}\n" if kind else "").encode() + f"data: {data}\n\n".encode()


# -- whole replies ------------------------------------------------------------------------------


def _anthropic_usage(s: Stored) -> dict[str, int]:
    return {
        "input_tokens": s.tokens("new_input"),
        "cache_creation_input_tokens": s.tokens("cache_write"),
        "cache_read_input_tokens": s.tokens("cache_read"),
        "output_tokens": s.tokens("output"),
    }


def _openai_usage(s: Stored, protocol: Protocol) -> dict[str, Any]:
    # OpenAI counts cached tokens inside the prompt's (normalized apart, TOK-1).
    prompt, output = s.tokens("new_input") + s.tokens("cache_read"), s.tokens("output")
    if protocol == "openai_chat":
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": s.tokens("cache_read")},
        }
    return {
        "input_tokens": prompt,
        "output_tokens": output,
        "total_tokens": prompt + output,
        "input_tokens_details": {"cached_tokens": s.tokens("cache_read")},
        "output_tokens_details": {"reasoning_tokens": s.tokens("reasoning")},
    }


def _blocks(message: Message) -> list[dict[str, Any]]:
    (wire,) = to_anthropic([message])["messages"]
    content = wire["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(block) for block in content]


def _whole(protocol: Protocol, s: Stored) -> dict[str, Any]:
    if protocol == "anthropic":
        return {
            "id": s.response_id,
            "type": "message",
            "role": "assistant",
            "model": s.model,
            "content": _blocks(s.message),
            "stop_reason": s.stop,
            "stop_sequence": None,
            "usage": _anthropic_usage(s),
        }
    if protocol == "openai_chat":
        (message,) = to_openai_chat([s.message])
        choice = {"index": 0, "message": message, "finish_reason": s.stop, "logprobs": None}
        return {
            "id": s.response_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": s.model,
            "choices": [choice],
            "usage": _openai_usage(s, protocol),
        }
    return {
        "id": s.response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": s.stop or "completed",
        "model": s.model,
        "output": list(to_openai_responses([s.message])),
        "usage": _openai_usage(s, protocol),
    }


# -- streams ------------------------------------------------------------------------------------


def _events(protocol: Protocol, s: Stored, include_usage: bool) -> list[bytes]:
    if protocol == "anthropic":
        return _anthropic_events(s)
    if protocol == "openai_chat":
        return _chat_events(s, include_usage)
    whole = _whole(protocol, s)
    started = {**whole, "status": "in_progress", "output": []}
    values: list[tuple[str, dict[str, Any]]] = [("response.created", {"response": started})]
    for k, item in enumerate(whole["output"]):
        for kind in ("response.output_item.added", "response.output_item.done"):
            values.append((kind, {"output_index": k, "item": item}))
    end = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
    values.append((end, {"response": whole}))
    # Numbered in order, as a Responses stream is.
    return [
        _sse(kind, {"type": kind, **value, "sequence_number": n})
        for n, (kind, value) in enumerate(values)
    ]


def _anthropic_events(s: Stored) -> list[bytes]:
    usage = _anthropic_usage(s)
    head = {**_whole("anthropic", s), "content": [], "stop_reason": None}
    head["usage"] = {**usage, "output_tokens": 0}
    values: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": head})]
    for index, block in enumerate(_blocks(s.message)):
        start, deltas = _split(block)
        values.append(("content_block_start", {"index": index, "content_block": start}))
        values += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        values.append(("content_block_stop", {"index": index}))
    stop = {"stop_reason": s.stop, "stop_sequence": None}
    values.append(
        ("message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}})
    )
    values.append(("message_stop", {}))
    return [_sse(kind, {"type": kind, **value}) for kind, value in values]


def _split(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block as the start event's block and the deltas that complete it; a block of
    another shape comes whole in its start event."""
    kind, keys = block.get("type"), set(block)
    if kind == "text" and keys == {"type", "text"}:
        return {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
    if kind == "tool_use" and keys == {"type", "id", "name", "input"}:
        partial = json.dumps(block["input"], ensure_ascii=False)
        return {**block, "input": {}}, [{"type": "input_json_delta", "partial_json": partial}]
    if kind == "thinking" and keys <= {"type", "thinking", "signature"}:
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        if "signature" in block:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {"type": "thinking", "thinking": ""}, deltas
    return block, []


def _chat_events(s: Stored, include_usage: bool) -> list[bytes]:
    whole = _whole("openai_chat", s)
    message = whole["choices"][0]["message"]
    delta = {k: v for k, v in message.items() if k != "tool_calls"}
    if "tool_calls" in message:
        delta["tool_calls"] = [{"index": k, **c} for k, c in enumerate(message["tool_calls"])]
    frame = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    out = [_sse(None, {**frame, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})]
    finish = {"index": 0, "delta": {}, "finish_reason": s.stop}
    out.append(_sse(None, {**frame, "choices": [finish]}))
    if include_usage:
        out.append(_sse(None, {**frame, "choices": [], "usage": whole["usage"]}))
    out.append(_sse(None, "[DONE]"))
    return out
