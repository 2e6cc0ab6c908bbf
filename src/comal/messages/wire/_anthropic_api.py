"""The Anthropic Messages API as a :class:`~comal.messages.wire.WireProtocol`.

Served on ``/v1/messages`` (Claude Code adds ``?beta=true``). One item per wire message; Claude
Code sends system messages inside the conversation, read and written in place
(``inline_system``). Messages comal writes into a conversation join the client's neighbour of
the same role (a checkpoint before the next user message must not make two user turns in a
row). Stop words, error types and the model list follow the API reference; errors are
``{"type": "error", "error": {"type", "message"}}`` and a key goes upstream as ``x-api-key``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from ...errors import InputError
from .._parts import Message, Role
from ._anthropic import from_anthropic, from_anthropic_message, to_anthropic
from ._anthropic_sse import AnthropicAccumulator, AnthropicSplicer, anthropic_events
from ._protocol import WireProtocol
from ._reply import CONTEXT_LENGTH, OUTPUT_LENGTH, Reply, Stop, WireReply, strip_cache
from ._shared import PROVIDER_ANTHROPIC

__all__ = ["ANTHROPIC"]

_STOPS: Final[dict[str, Stop]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": OUTPUT_LENGTH,
    "model_context_window_exceeded": CONTEXT_LENGTH,
    "refusal": "refusal",
}

_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_CLAUDE_SESSION: Final = re.compile(r"session_([0-9a-fA-F-]{36})")

# The API's own replies to the failures a script injects: (status, error type, message).
_FAILURES: Final = {
    "context_length": (
        400,
        "invalid_request_error",
        "prompt is too long: 210345 tokens > 200000 maximum",
    ),
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed your organization's rate limit. Please try again later.",
    ),
    "server": (500, "api_error", "Internal server error"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "bad_request": (
        400,
        "invalid_request_error",
        'messages: roles must alternate between "user" and "assistant"',
    ),
    "auth": (401, "authentication_error", "invalid x-api-key"),
}


def _read(raw: tuple[Any, ...]) -> Sequence[Message]:
    if not all(isinstance(value, Mapping) for value in raw):
        raise InputError("expected an object")
    # Claude Code sends system messages inside the conversation (?beta=true).
    return from_anthropic({"messages": list(raw)}, inline_system=True)


def _render(messages: Sequence[Message]) -> list[Any]:
    return list(to_anthropic(messages, inline_system=True)["messages"])


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _merge(values: list[tuple[Any, bool]]) -> list[Any]:
    """Adjacent user (or assistant) messages joined into one where one of them is comal's;
    the client's own adjacent messages stay as it sent them."""
    out: list[Any] = []
    previous_ours = False
    for value, ours in values:
        prev = out[-1] if out else None
        if (
            (ours or previous_ours)
            and isinstance(prev, dict)
            and isinstance(value, Mapping)
            and prev.get("role") == value.get("role")
            and value.get("role") in ("user", "assistant")
        ):
            out[-1] = {
                **prev,
                "content": _blocks(prev.get("content")) + _blocks(value.get("content")),
            }
        else:
            out.append(value)
        previous_ours = ours
    return out


def _instructions(body: Mapping[str, Any]) -> Sequence[Message]:
    if body.get("system") is None:
        return ()
    return from_anthropic({"system": body["system"], "messages": []})


def _reply(body: Mapping[str, Any]) -> Reply:
    usage = body.get("usage")
    rid, model = body.get("id"), body.get("model")
    message = from_anthropic_message({"content": body.get("content") or []})
    return Reply(
        strip_cache(message),
        dict(usage) if isinstance(usage, Mapping) else None,
        body.get("stop_reason"),
        rid if isinstance(rid, str) else None,
        model if isinstance(model, str) else None,
    )


def _stop(raw: str | None, detail: str | None = None) -> Stop:
    return "error" if raw is None else _STOPS.get(raw, "error")


def _content(message: Message) -> list[dict[str, Any]]:
    (wire,) = to_anthropic([message])["messages"]
    return [dict(block) for block in _blocks(wire["content"])]


def _usage_of(usage: Mapping[str, int | None]) -> dict[str, Any]:
    return {
        "input_tokens": usage.get("new_input") or 0,
        "cache_creation_input_tokens": usage.get("cache_write") or 0,
        "cache_read_input_tokens": usage.get("cache_read") or 0,
        "output_tokens": usage.get("output") or 0,
    }


def _response(reply: WireReply) -> dict[str, Any]:
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": reply.content,
        "stop_reason": reply.stop,
        "stop_sequence": None,
        "usage": dict(reply.usage or {}),
    }


def _error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": _TYPES.get(status, "api_error"), "message": message}}


def _stream_error(message: str) -> bytes:
    data = {"type": "error", "error": {"type": "api_error", "message": message}}
    return f"event: error\ndata: {json.dumps(data)}\n\n".encode()


def _cache_blocks(value: object) -> int:
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(_cache_blocks(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(_cache_blocks(v) for v in value)
    return 0


def _refuses(body: Mapping[str, Any]) -> str | None:
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    found = sum(_cache_blocks(body.get(k)) for k in ("tools", "system", "messages"))
    if found > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {found}."
    return None


def _claude_session(body: Mapping[str, Any]) -> str | None:
    """Claude Code's session id: in ``metadata.user_id``, as JSON or ``..._session_<uuid>``."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if not isinstance(user_id, str):
        return None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping) and isinstance(parsed.get("session_id"), str):
        return str(parsed["session_id"])
    match = _CLAUDE_SESSION.search(user_id)
    return match[1] if match else None


def _client_session(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    return _claude_session(body) or headers.get("x-claude-code-session-id")


def _model(name: str, owner: str, created: int) -> dict[str, Any]:
    when = datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": "model", "id": name, "display_name": name, "created_at": when}


def _models(data: list[dict[str, Any]]) -> dict[str, Any]:
    first = data[0]["id"] if data else None
    last = data[-1]["id"] if data else None
    return {"data": data, "has_more": False, "first_id": first, "last_id": last}


def _export(messages: Sequence[Message], recorded_inline: bool) -> Any:
    # A system message after the conversation started can only be carried inline too.
    system = (Role.SYSTEM, Role.DEVELOPER)
    roles = [m.role for m in messages]
    first = next((i for i, r in enumerate(roles) if r not in system), len(roles))
    late = any(r in system for r in roles[first:])
    return to_anthropic(messages, inline_system=recorded_inline or late)


ANTHROPIC: Final = WireProtocol(
    name=PROVIDER_ANTHROPIC,
    title="Anthropic Messages",
    routes=("/v1/messages",),
    conversation="messages",
    read=_read,
    render=_render,
    reply=_reply,
    stop=_stop,
    usage=PROVIDER_ANTHROPIC,
    accumulator=partial(AnthropicAccumulator, _reply),
    ends=(b"message_stop",),
    content=_content,
    usage_of=_usage_of,
    response=_response,
    events=anthropic_events,
    error=_error,
    stream_error=_stream_error,
    upstream="anthropic",
    auth=("x-api-key", ""),
    request_id="request-id",
    client="anthropic-client",
    merge=_merge,
    instructions=_instructions,
    system_key="system",
    max_keys=("max_tokens",),
    client_session=_client_session,
    splicer=partial(AnthropicSplicer, _reply),
    failures={
        kind: (status, {"type": "error", "error": {"type": kind_type, "message": message}})
        for kind, (status, kind_type, message) in _FAILURES.items()
    },
    refuses=_refuses,
    model=_model,
    models=_models,
    marks=("anthropic-version",),
    export=_export,
    export_name="anthropic",
)
