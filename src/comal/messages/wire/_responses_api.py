"""OpenAI Responses as a :class:`~comal.messages.wire.WireProtocol`.

Served on ``/v1/responses``. Adjacent assistant-side input items (reasoning, an output message,
calls) are one canonical assistant message, as the API's output is: they stay one item, so the
next request finds the recorded reply; a string ``input`` is the API's shorthand for one user
message. ``instructions`` is the system prompt. The stop word is the response's ``status``,
with ``incomplete_details.reason`` as its detail.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

from .._parts import Message, Role
from ._openai_common import openai_failures, openai_protocol
from ._openai_responses import from_openai_responses, is_assistant_item, to_openai_responses
from ._reply import OUTPUT_LENGTH, Reply, Stop, WireReply, strip_cache
from ._responses_sse import ResponsesAccumulator, ResponsesSplicer, responses_events
from ._shared import PROVIDER_OPENAI_RESPONSES

__all__ = ["RESPONSES"]

_INCOMPLETE: Final[dict[str, Stop]] = {
    "max_output_tokens": OUTPUT_LENGTH,
    "content_filter": "refusal",
}

_CONTEXT: Final = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)


def _group(conversation: object) -> list[tuple[Any, ...]] | None:
    if isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    if not isinstance(conversation, list):
        return None
    groups: list[list[Any]] = []
    for raw in conversation:
        if groups and is_assistant_item(raw) and is_assistant_item(groups[-1][-1]):
            groups[-1].append(raw)
        else:
            groups.append([raw])
    return [tuple(group) for group in groups]


def _read(raw: tuple[Any, ...]) -> Sequence[Message]:
    return from_openai_responses(list(raw))


def _render(messages: Sequence[Message]) -> list[Any]:
    return list(to_openai_responses(messages))


def _instructions(body: Mapping[str, Any]) -> Sequence[Message]:
    text = body.get("instructions")
    return (Message.system(text),) if isinstance(text, str) and text else ()


def _reply(body: Mapping[str, Any]) -> Reply:
    usage = body.get("usage")
    rid, model, status = body.get("id"), body.get("model"), body.get("status")
    messages = from_openai_responses(body.get("output") or [])
    assistant = next((m for m in messages if m.role is Role.ASSISTANT), None)
    return Reply(
        None if assistant is None else strip_cache(assistant),
        dict(usage) if isinstance(usage, Mapping) else None,
        status if isinstance(status, str) else None,
        rid if isinstance(rid, str) else None,
        model if isinstance(model, str) else None,
    )


def _stop(raw: str | None, detail: str | None = None) -> Stop:
    if raw == "completed":
        return "end_turn"
    if raw == "incomplete":
        return _INCOMPLETE.get(detail or "", "error")
    return "error"  # failed, cancelled, none, anything newer


def _tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": spec["name"],
        "description": spec.get("description", ""),
        "parameters": spec["input_schema"],
    }


def _content(message: Message) -> list[Any]:
    return list(to_openai_responses([message]))


def _usage_of(usage: Mapping[str, int | None]) -> dict[str, Any]:
    # OpenAI counts cached tokens inside the input's (normalized apart, TOK-1).
    read = usage.get("cache_read") or 0
    prompt, output = (usage.get("new_input") or 0) + read, usage.get("output") or 0
    return {
        "input_tokens": prompt,
        "output_tokens": output,
        "total_tokens": prompt + output,
        "input_tokens_details": {"cached_tokens": read},
        "output_tokens_details": {"reasoning_tokens": usage.get("reasoning") or 0},
    }


def _response(reply: WireReply) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": reply.id,
        "object": "response",
        "created_at": reply.created,
        "model": reply.model,
        "status": reply.stop or "completed",
        "incomplete_details": None if reply.detail is None else {"reason": reply.detail},
        "error": None,
        "output": reply.content,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    if reply.usage is not None:
        out["usage"] = dict(reply.usage)
    return out


def _stream_error(message: str) -> bytes:
    event = {"type": "error", "code": "stream_broken", "message": message, "param": None}
    return f"event: error\ndata: {json.dumps(event)}\n\n".encode()


def _export(messages: Sequence[Message], recorded_inline: bool) -> Any:
    return to_openai_responses(messages)


RESPONSES: Final = openai_protocol(
    name=PROVIDER_OPENAI_RESPONSES,
    title="OpenAI Responses",
    routes=("/v1/responses",),
    conversation="input",
    read=_read,
    render=_render,
    reply=_reply,
    stop=_stop,
    usage=PROVIDER_OPENAI_RESPONSES,
    accumulator=partial(ResponsesAccumulator, _reply),
    ends=(b"response.completed", b"response.incomplete"),
    content=_content,
    usage_of=_usage_of,
    response=_response,
    events=responses_events,
    stream_error=_stream_error,
    group=_group,
    instructions=_instructions,
    max_keys=("max_output_tokens",),
    tool=_tool,
    splicer=partial(ResponsesSplicer, _reply),
    failures=openai_failures("input", _CONTEXT),
    export=_export,
    export_name="openai-responses",
)
