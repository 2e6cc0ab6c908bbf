"""A script entry answered in a wire protocol's own format, whole or as server-sent events.

A script entry is an Anthropic-shaped reply (content blocks, ``stop_reason``, Anthropic usage).
Here it becomes the reply of the route's protocol (:class:`~comal.messages.wire.WireReply`),
which the protocol then writes: its whole response (:attr:`WireProtocol.response`) and its
stream (:attr:`WireProtocol.events`, strings cut into ``chunk``-character pieces, so text and
tool arguments arrive split mid-word, mid-escape and mid-key, as real streams do). The proxy's
replay of a stored reply is written by the same two parts.

How an entry reads in each built-in protocol follows the public API references: Chat
Completions gets the text joined, thinking as ``reasoning_content``, tool calls with their
arguments as JSON text (``", "`` / ``": "`` spacing, so a test can tell exact text from a
re-serialization) and the stop as a ``finish_reason``; Responses gets one output item per block
(reasoning with its summary and encrypted content, refusals as ``refusal`` parts) and
``incomplete`` for a length stop. A protocol a plugin adds gets the entry as a canonical message
in its own content shape (:attr:`WireProtocol.content`), its usage normalized and written in its
own shape, and the script's stop word as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..messages.wire import (
    PROVIDER_ANTHROPIC,
    PROVIDER_OPENAI_CHAT,
    PROVIDER_OPENAI_RESPONSES,
    WireProtocol,
    WireReply,
    from_anthropic_message,
)
from ..providers.script import blocks, stop_reason
from ..tokens import normalize_usage

__all__ = ["cache_prefix", "cache_serialization", "scripted_events", "scripted_response"]

_CHAT_FINISH = {"tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


def _arguments(block: Mapping[str, Any]) -> str:
    # The text a provider streams for a tool input: JSON with the default ", " / ": " spacing,
    # so a test can tell exact text from a re-serialization.
    return json.dumps(block.get("input", {}), ensure_ascii=False)


def _text(entry: Mapping[str, Any]) -> str:
    return "".join(b.get("text", "") for b in blocks(entry) if b["type"] == "text")


def _thinking(entry: Mapping[str, Any]) -> str:
    return "".join(b.get("thinking", "") for b in blocks(entry) if b["type"] == "thinking")


def _id(entry: Mapping[str, Any], rid: str) -> str:
    return str(entry.get("id") or rid)


def _model(entry: Mapping[str, Any], model: str) -> str:
    return str(entry.get("model") or model)


# -- how an entry reads in each built-in protocol -----------------------------------------------


def _anthropic(entry: Mapping[str, Any], rid: str, model: str) -> WireReply:
    usage = dict(entry.get("usage") or {})
    content = blocks(entry)
    return WireReply(_id(entry, rid), _model(entry, model), content, stop_reason(entry), usage)


def _chat_usage(usage: Mapping[str, Any]) -> dict[str, Any] | None:
    new, out = usage.get("input_tokens"), usage.get("output_tokens")
    if new is None and out is None:
        return None
    read = usage.get("cache_read_input_tokens")
    prompt = (new or 0) + (read or 0) + (usage.get("cache_creation_input_tokens") or 0)
    result: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": out or 0,
        "total_tokens": prompt + (out or 0),
    }
    if read is not None:  # compatible servers often leave the details out: unknown, not 0
        result["prompt_tokens_details"] = {"cached_tokens": read}
    return result


def _chat(entry: Mapping[str, Any], rid: str, model: str) -> WireReply:
    message: dict[str, Any] = {"role": "assistant", "content": _text(entry) or None}
    message["refusal"] = None
    if _thinking(entry):
        message["reasoning_content"] = _thinking(entry)
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": _arguments(b)},
        }
        for b in blocks(entry)
        if b["type"] == "tool_use"
    ]
    if calls:
        message["tool_calls"] = calls
    finish = _CHAT_FINISH.get(stop_reason(entry), "stop")
    usage = _chat_usage(entry.get("usage") or {})
    return WireReply(_id(entry, rid), _model(entry, model), message, finish, usage)


def _responses_item(block: Mapping[str, Any], refused: bool, name: str) -> dict[str, Any] | None:
    kind = block["type"]
    if kind == "text":
        part = (
            {"type": "refusal", "refusal": block["text"]}
            if refused
            else {"type": "output_text", "text": block["text"], "annotations": []}
        )
        return {
            "type": "message",
            "id": f"msg_{name}",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
    if kind == "tool_use":
        return {
            "type": "function_call",
            "id": f"fc_{name}",
            "call_id": block["id"],
            "name": block["name"],
            "arguments": _arguments(block),
            "status": "completed",
        }
    if kind == "thinking":
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_{name}",
            "summary": [{"type": "summary_text", "text": block.get("thinking", "")}],
        }
        if block.get("signature"):
            item["encrypted_content"] = block["signature"]
        return item
    return None


def _responses(entry: Mapping[str, Any], rid: str, model: str) -> WireReply:
    stop = stop_reason(entry)
    refused = stop == "refusal"
    items = (_responses_item(b, refused, f"{rid}_{i}") for i, b in enumerate(blocks(entry)))
    output = [item for item in items if item is not None]
    incomplete = stop in ("max_tokens", "model_context_window_exceeded")
    status, detail = ("incomplete", "max_output_tokens") if incomplete else ("completed", None)
    usage = entry.get("usage") or {}
    chat = _chat_usage(usage)
    counts = None
    if chat is not None:
        counts = {
            "input_tokens": chat["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": usage.get("cache_read_input_tokens", 0)},
            "output_tokens": chat["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": chat["total_tokens"],
        }
    return WireReply(_id(entry, rid), _model(entry, model), output, status, counts, detail=detail)


_SCRIPTED: dict[str, Callable[[Mapping[str, Any], str, str], WireReply]] = {
    PROVIDER_ANTHROPIC: _anthropic,
    PROVIDER_OPENAI_CHAT: _chat,
    PROVIDER_OPENAI_RESPONSES: _responses,
}


def _reply(protocol: WireProtocol, entry: Mapping[str, Any], rid: str, model: str) -> WireReply:
    own = _SCRIPTED.get(protocol.name)
    if own is not None:
        return own(entry, rid, model)
    # Any other protocol: the entry as a canonical message, in the protocol's own shapes.
    message = from_anthropic_message({"content": blocks(entry)})
    usage = entry.get("usage")
    counts = None
    if usage:
        counts = protocol.usage_of(normalize_usage(PROVIDER_ANTHROPIC, usage).to_dict())
    content = protocol.content(message)
    return WireReply(_id(entry, rid), _model(entry, model), content, stop_reason(entry), counts)


def scripted_response(
    protocol: WireProtocol, entry: Mapping[str, Any], rid: str, model: str
) -> dict[str, Any]:
    """A reply entry as ``protocol``'s whole response body."""
    return protocol.response(_reply(protocol, entry, rid, model))


def scripted_events(
    protocol: WireProtocol,
    entry: Mapping[str, Any],
    rid: str,
    model: str,
    chunk: int,
    include_usage: bool = False,
) -> Iterator[bytes]:
    """A reply entry as ``protocol``'s stream; ``include_usage``: the client asked for the
    usage chunk (Chat Completions' ``stream_options``)."""
    whole = scripted_response(protocol, entry, rid, model)
    return protocol.events(whole, chunk, include_usage)


# -- prompt-cache prefix ------------------------------------------------------------------------

# ``cache_control`` is never a block's first key, so the marker always follows a comma.
_CACHE_MARK = ',"cache_control":'


def cache_prefix(body: Mapping[str, Any]) -> str:
    """The part of an Anthropic request the prompt cache keys on, up to its last breakpoint.

    The request is serialized in the cache's order — ``tools``, ``system``, ``messages`` — as
    compact JSON with keys in the order they were sent, and cut just before the last
    ``,"cache_control":`` marker. Two requests share a cache entry up to a breakpoint exactly when
    one's prefix starts the other's serialization (:func:`cache_serialization`). Empty when the
    request has no breakpoint.
    """
    text = cache_serialization(body)
    end = text.rfind(_CACHE_MARK)
    return "" if end < 0 else text[:end]


def cache_serialization(body: Mapping[str, Any]) -> str:
    """``tools``, ``system`` and ``messages`` of an Anthropic request, serialized in that order."""
    ordered = [body.get("tools", []), body.get("system", []), body.get("messages", [])]
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
