"""A reply entry rendered in each provider's real wire format, whole or as server-sent events.

Shapes follow the public API references: Anthropic Messages (``message`` objects; SSE events
``message_start`` … ``message_stop`` with ``text_delta``, ``input_json_delta``,
``thinking_delta`` and ``signature_delta``), OpenAI Chat Completions (``chat.completion`` and
``chat.completion.chunk`` with ``tool_calls`` deltas, ended by ``data: [DONE]``) and OpenAI
Responses (``response`` objects; ``response.created`` … ``response.completed`` events).

Streamed strings are cut into ``chunk``-character pieces, so text and tool arguments arrive split
mid-word, mid-escape and mid-key, as real streams do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..providers.script import blocks, stop_reason

__all__ = [
    "anthropic_events",
    "anthropic_message",
    "cache_prefix",
    "cache_serialization",
    "chat_chunks",
    "chat_completion",
    "responses_events",
    "responses_object",
    "sse",
]

_CHAT_FINISH = {"tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


def sse(event: str | None, data: object) -> bytes:
    """One server-sent event; ``event=None`` writes a bare ``data:`` line (OpenAI Chat)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments(block: Mapping[str, Any]) -> str:
    # The text a provider streams for a tool input: JSON with the default ", " / ": " spacing,
    # so a test can tell exact text from a re-serialization.
    return json.dumps(block.get("input", {}), ensure_ascii=False)


def _text(entry: Mapping[str, Any]) -> str:
    return "".join(b.get("text", "") for b in blocks(entry) if b["type"] == "text")


def _thinking(entry: Mapping[str, Any]) -> str:
    return "".join(b.get("thinking", "") for b in blocks(entry) if b["type"] == "thinking")


def _tool_uses(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [b for b in blocks(entry) if b["type"] == "tool_use"]


# -- Anthropic ----------------------------------------------------------------------------------


def anthropic_message(entry: Mapping[str, Any], rid: str, model: str) -> dict[str, Any]:
    return {
        "id": entry.get("id") or rid,
        "type": "message",
        "role": "assistant",
        "model": entry.get("model") or model,
        "content": blocks(entry),
        "stop_reason": stop_reason(entry),
        "stop_sequence": None,
        "usage": dict(entry.get("usage") or {}),
    }


def anthropic_events(entry: Mapping[str, Any], rid: str, model: str, chunk: int) -> Iterator[bytes]:
    whole = anthropic_message(entry, rid, model)
    start_usage = {k: v for k, v in whole["usage"].items() if k != "output_tokens"}
    start = {**whole, "content": [], "stop_reason": None, "usage": {**start_usage}}
    if "output_tokens" in whole["usage"]:
        start["usage"]["output_tokens"] = 1
    yield sse("message_start", {"type": "message_start", "message": start})
    yield sse("ping", {"type": "ping"})
    for index, block in enumerate(whole["content"]):
        yield from _anthropic_block(index, block, chunk)
    delta_usage = {"output_tokens": whole["usage"].get("output_tokens", 0)}
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": delta_usage,
        },
    )
    yield sse("message_stop", {"type": "message_stop"})


def _anthropic_block(index: int, block: dict[str, Any], chunk: int) -> Iterator[bytes]:
    kind = block["type"]
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], chunk)]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": p}
            for p in _pieces(_arguments(block), chunk)
        ]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [
            {"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], chunk)
        ]
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted thinking and anything else arrive whole
        start = block
    yield sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for delta in deltas:
        yield sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )
    yield sse("content_block_stop", {"type": "content_block_stop", "index": index})


# -- OpenAI Chat Completions --------------------------------------------------------------------


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


def _chat_calls(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": _arguments(b)},
        }
        for b in _tool_uses(entry)
    ]


def chat_completion(entry: Mapping[str, Any], rid: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": _text(entry) or None}
    message["refusal"] = None
    if _thinking(entry):
        message["reasoning_content"] = _thinking(entry)
    calls = _chat_calls(entry)
    if calls:
        message["tool_calls"] = calls
    out: dict[str, Any] = {
        "id": entry.get("id") or rid,
        "object": "chat.completion",
        "created": 0,
        "model": entry.get("model") or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _CHAT_FINISH.get(stop_reason(entry), "stop"),
                "logprobs": None,
            }
        ],
    }
    usage = _chat_usage(entry.get("usage") or {})
    if usage is not None:
        out["usage"] = usage
    return out


def chat_chunks(
    entry: Mapping[str, Any], rid: str, model: str, chunk: int, include_usage: bool
) -> Iterator[bytes]:
    whole = chat_completion(entry, rid, model)
    head = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def piece(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return sse(None, {**head, "choices": [choice]})

    yield piece({"role": "assistant", "content": ""})
    for p in _pieces(_thinking(entry), chunk):
        yield piece({"reasoning_content": p})
    for p in _pieces(_text(entry), chunk):
        yield piece({"content": p})
    for k, call in enumerate(_chat_calls(entry)):
        function = call["function"]
        first = {
            "index": k,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        yield piece({"tool_calls": [first]})
        for p in _pieces(function["arguments"], chunk):
            yield piece({"tool_calls": [{"index": k, "function": {"arguments": p}}]})
    yield piece({}, whole["choices"][0]["finish_reason"])
    if include_usage and "usage" in whole:
        yield sse(None, {**head, "choices": [], "usage": whole["usage"]})
    yield sse(None, "[DONE]")


# -- OpenAI Responses ---------------------------------------------------------------------------


def _responses_items(entry: Mapping[str, Any], rid: str) -> list[dict[str, Any]]:
    refused = stop_reason(entry) == "refusal"
    items: list[dict[str, Any]] = []
    for i, block in enumerate(blocks(entry)):
        kind = block["type"]
        if kind == "text":
            part = (
                {"type": "refusal", "refusal": block["text"]}
                if refused
                else {"type": "output_text", "text": block["text"], "annotations": []}
            )
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{rid}_{i}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [part],
                }
            )
        elif kind == "tool_use":
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{rid}_{i}",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": _arguments(block),
                    "status": "completed",
                }
            )
        elif kind == "thinking":
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": f"rs_{rid}_{i}",
                "summary": [{"type": "summary_text", "text": block.get("thinking", "")}],
            }
            if block.get("signature"):
                item["encrypted_content"] = block["signature"]
            items.append(item)
    return items


def responses_object(entry: Mapping[str, Any], rid: str, model: str) -> dict[str, Any]:
    stop = stop_reason(entry)
    usage = entry.get("usage") or {}
    out: dict[str, Any] = {
        "id": entry.get("id") or rid,
        "object": "response",
        "created_at": 0,
        "model": entry.get("model") or model,
        "status": "completed",
        "incomplete_details": None,
        "error": None,
        "output": _responses_items(entry, rid),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if stop in ("max_tokens", "model_context_window_exceeded"):
        out["status"] = "incomplete"
        out["incomplete_details"] = {"reason": "max_output_tokens"}
    chat = _chat_usage(usage)
    if chat is not None:
        out["usage"] = {
            "input_tokens": chat["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": usage.get("cache_read_input_tokens", 0)},
            "output_tokens": chat["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": chat["total_tokens"],
        }
    return out


def responses_events(entry: Mapping[str, Any], rid: str, model: str, chunk: int) -> Iterator[bytes]:
    whole = responses_object(entry, rid, model)
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    pending = {**whole, "status": "in_progress", "output": [], "incomplete_details": None}
    pending.pop("usage", None)
    yield event("response.created", response=pending)
    for index, item in enumerate(whole["output"]):
        ids = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = item["content"][0]
            if part["type"] == "output_text":
                yield event(
                    "response.content_part.added", **ids, content_index=0, part={**part, "text": ""}
                )
                for p in _pieces(part["text"], chunk):
                    yield event(
                        "response.output_text.delta", **ids, content_index=0, delta=p, logprobs=[]
                    )
                yield event(
                    "response.output_text.done",
                    **ids,
                    content_index=0,
                    text=part["text"],
                    logprobs=[],
                )
                yield event("response.content_part.done", **ids, content_index=0, part=part)
        elif item["type"] == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for p in _pieces(item["arguments"], chunk):
                yield event("response.function_call_arguments.delta", **ids, delta=p)
            yield event(
                "response.function_call_arguments.done",
                **ids,
                arguments=item["arguments"],
                name=item["name"],
            )
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    final = "response.completed" if whole["status"] == "completed" else "response.incomplete"
    yield event(final, response=whole)


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
