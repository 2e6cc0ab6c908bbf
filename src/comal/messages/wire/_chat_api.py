"""OpenAI Chat Completions as a :class:`~comal.messages.wire.WireProtocol`.

Served on ``/v1/chat/completions``; one item per wire message. It is the fallback protocol:
``GET /v1/models`` without an Anthropic mark, and errors on ``/v1/`` paths no route has, are in
OpenAI's shape. A key goes upstream as ``authorization: Bearer``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from .._parts import Message
from ._chat_sse import ChatAccumulator, ChatSplicer, chat_events
from ._openai_chat import from_openai_chat, to_openai_chat
from ._openai_common import openai_failures, openai_protocol
from ._reply import OUTPUT_LENGTH, Reply, Stop, WireReply, strip_cache
from ._shared import PROVIDER_OPENAI_CHAT

__all__ = ["CHAT"]

_STOPS: Final[dict[str, Stop]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": OUTPUT_LENGTH,
    "content_filter": "refusal",
}


def _read(raw: tuple[Any, ...]) -> Sequence[Message]:
    return from_openai_chat(list(raw))


def _render(messages: Sequence[Message]) -> list[Any]:
    return list(to_openai_chat(messages))


def _reply(body: Mapping[str, Any]) -> Reply:
    usage = body.get("usage")
    usage = dict(usage) if isinstance(usage, Mapping) else None
    rid = body.get("id") if isinstance(body.get("id"), str) else None
    model = body.get("model") if isinstance(body.get("model"), str) else None
    choices = body.get("choices") or []
    if not choices:
        return Reply(None, usage, None, rid, model)
    choice = choices[0]
    raw = dict(choice.get("message") or {})
    raw.setdefault("role", "assistant")
    message = from_openai_chat([raw])[0]
    return Reply(strip_cache(message), usage, choice.get("finish_reason"), rid, model)


def _stop(raw: str | None, detail: str | None = None) -> Stop:
    return "error" if raw is None else _STOPS.get(raw, "error")


def _tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    function = {
        "name": spec["name"],
        "description": spec.get("description", ""),
        "parameters": spec["input_schema"],
    }
    return {"type": "function", "function": function}


def _content(message: Message) -> dict[str, Any]:
    (wire,) = to_openai_chat([message])
    return dict(wire)


def _usage_of(usage: Mapping[str, int | None]) -> dict[str, Any]:
    # OpenAI counts cached tokens inside the prompt's (normalized apart, TOK-1).
    read = usage.get("cache_read") or 0
    prompt, output = (usage.get("new_input") or 0) + read, usage.get("output") or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": read},
    }


def _response(reply: WireReply) -> dict[str, Any]:
    choice = {"index": 0, "message": reply.content, "finish_reason": reply.stop, "logprobs": None}
    out: dict[str, Any] = {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [choice],
    }
    if reply.usage is not None:
        out["usage"] = dict(reply.usage)
    return out


def _stream_error(message: str) -> bytes:
    data = {"error": {"message": message, "type": "server_error", "code": "stream_broken"}}
    return f"data: {json.dumps(data)}\n\n".encode()


def _export(messages: Sequence[Message], recorded_inline: bool) -> Any:
    return to_openai_chat(messages)


CHAT: Final = openai_protocol(
    name=PROVIDER_OPENAI_CHAT,
    title="OpenAI Chat Completions",
    routes=("/v1/chat/completions",),
    conversation="messages",
    read=_read,
    render=_render,
    reply=_reply,
    stop=_stop,
    usage=PROVIDER_OPENAI_CHAT,
    accumulator=partial(ChatAccumulator, _reply),
    ends=(b"[DONE]",),
    content=_content,
    usage_of=_usage_of,
    response=_response,
    events=chat_events,
    stream_error=_stream_error,
    max_keys=("max_completion_tokens", "max_tokens"),
    tool=_tool,
    splicer=partial(ChatSplicer, _reply),
    failures=openai_failures("messages"),
    fallback=True,
    export=_export,
    export_name="openai",
)
