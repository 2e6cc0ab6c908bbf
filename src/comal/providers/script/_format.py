"""Script entries: replies in Anthropic Messages form, and injected errors.

Shared by :class:`ScriptedProvider` and the ``script:`` model (in process) and by
:class:`comal.testing.FakeServer` (over HTTP), so one script file drives all three. The format
is documented in :mod:`comal.providers.script`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from ...errors import InputError
from ...messages.wire import from_anthropic_message
from .._base import finish_response
from .._errors import ProviderError, error_for_status
from .._stops import normalize_stop
from .._types import ModelResponse

__all__ = [
    "ERROR_KINDS",
    "Entry",
    "Reply",
    "blocks",
    "check_entry",
    "entries",
    "error_from_entry",
    "error_reply",
    "load_script",
    "response_from_entry",
    "stop_reason",
]

Entry = dict[str, Any]

_KEYS: Final = frozenset({"content", "stop_reason", "usage", "model", "id", "error", "flavor"})

# kind -> (status, Anthropic error type, Anthropic message)
_ANTHROPIC_ERRORS: Final[dict[str, tuple[int, str, str]]] = {
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

# kind -> (status, OpenAI error type, code, message)
_OPENAI_ERRORS: Final[dict[str, tuple[int, str, str | None, str]]] = {
    "context_length": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 131072 tokens. Please reduce the length of the messages.",
    ),
    "rate_limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again in 20ms.",
    ),
    "server": (
        500,
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    "overloaded": (
        503,
        "server_error",
        None,
        "The engine is currently overloaded, please try again later",
    ),
    "bad_request": (400, "invalid_request_error", None, "Invalid value for 'tool_choice'."),
    "auth": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
}

_RESPONSES_CONTEXT: Final = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)

# Context-length errors as OpenAI-compatible servers send them (``"flavor"`` of an entry).
_COMPAT_CONTEXT: Final[dict[str, dict[str, Any]]] = {
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llamacpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5120,
            "n_ctx": 4096,
        }
    },
}

ERROR_KINDS: Final = tuple(_ANTHROPIC_ERRORS)


def check_entry(value: object, *, path: str | None = None, line: int | None = None) -> Entry:
    """``value`` as a script entry, or an :class:`InputError` saying what is wrong with it."""

    def fail(problem: str, field: str | None = None) -> InputError:
        return InputError(problem, path=path, line=line, field=field)

    if not isinstance(value, Mapping):
        raise fail(f"a script entry is a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise fail(f"unknown keys {unknown}; an entry has {sorted(_KEYS)}", unknown[0])
    if ("content" in value) == ("error" in value):
        raise fail("an entry has either 'content' (a reply) or 'error' (a failure), not both")
    if "error" in value:
        error = value["error"]
        if isinstance(error, str) and error not in ERROR_KINDS:
            raise fail(f"unknown error {error!r}; use one of {', '.join(ERROR_KINDS)}", "error")
        if isinstance(error, Mapping) and not isinstance(error.get("status"), int):
            raise fail("a custom error needs an integer 'status'", "error.status")
        if not isinstance(error, (str, Mapping)):
            raise fail("'error' is a name or {status, body, headers}", "error")
        return dict(value)
    content = value["content"]
    if isinstance(content, list):
        for j, block in enumerate(content):
            if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
                raise fail("each content block is an object with a 'type'", f"content[{j}]")
    elif not isinstance(content, str):
        raise fail("'content' is a string or a list of Anthropic content blocks", "content")
    if "usage" in value and not isinstance(value["usage"], Mapping):
        raise fail("'usage' is an Anthropic usage object", "usage")
    return dict(value)


def load_script(path: str | Path) -> list[Entry]:
    """Read a script file: one JSON entry per line; blank lines and ``#`` comments are skipped."""
    entries: list[Entry] = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(
            f"cannot read the script: {why}; give the path of a JSON-lines script file",
            path=str(path),
        ) from exc
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            value = json.loads(stripped)
        except ValueError as exc:
            raise InputError(f"not JSON ({exc})", path=str(path), line=number) from exc
        entries.append(check_entry(value, path=str(path), line=number))
    return entries


def blocks(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The entry's content as a list of blocks (a string is one text block)."""
    content = entry["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [dict(block) for block in content]


def stop_reason(entry: Mapping[str, Any]) -> str:
    """The entry's ``stop_reason``: as given, else ``tool_use`` when it calls a tool."""
    given = entry.get("stop_reason")
    if isinstance(given, str):
        return given
    return "tool_use" if any(b["type"] == "tool_use" for b in blocks(entry)) else "end_turn"


def response_from_entry(entry: Mapping[str, Any], model: str) -> ModelResponse:
    """The :class:`ModelResponse` an Anthropic provider would return for a reply entry."""
    message = from_anthropic_message({"content": blocks(entry)})
    raw_stop = stop_reason(entry)
    usage = entry.get("usage")
    return finish_response(
        message,
        normalize_stop("anthropic", raw_stop),
        raw_stop,
        dict(usage) if isinstance(usage, Mapping) else None,
        str(entry.get("model") or model),
        entry.get("id"),
        protocol="scripted",
        usage_protocol="anthropic",
    )


def error_reply(
    entry: Mapping[str, Any], protocol: str
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """``(status, headers, body)`` of an error entry in ``protocol``'s real error shape."""
    error = entry["error"]
    if isinstance(error, Mapping):
        headers = {str(k): str(v) for k, v in (error.get("headers") or {}).items()}
        return int(error["status"]), headers, dict(error.get("body") or {})
    headers = {"retry-after": "0"} if error == "rate_limit" else {}
    if protocol == "anthropic":
        status, kind, message = _ANTHROPIC_ERRORS[error]
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return status, headers, body
    flavor = entry.get("flavor")
    if error == "context_length" and isinstance(flavor, str) and flavor in _COMPAT_CONTEXT:
        return 400, headers, json.loads(json.dumps(_COMPAT_CONTEXT[flavor]))
    status, kind, code, message = _OPENAI_ERRORS[error]
    param = None
    if error == "context_length":
        param = "messages"
        if protocol == "openai_responses":
            param, message = "input", _RESPONSES_CONTEXT
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return status, headers, body


def error_from_entry(entry: Mapping[str, Any], provider: str) -> ProviderError:
    """The error a provider raises for an error entry (as if retries were exhausted)."""
    status, headers, body = error_reply(entry, "anthropic")
    return error_for_status(status, body, provider=provider, request_id=headers.get("request-id"))


Reply = Entry | ModelResponse | BaseException


def entries(replies: Iterable[object]) -> list[Reply]:
    """Replies as checked entries; responses and exceptions pass through as they are."""
    out: list[Reply] = []
    for i, reply in enumerate(replies):
        if isinstance(reply, (BaseException, ModelResponse)):
            out.append(reply)
        else:
            try:
                out.append(check_entry(reply))
            except InputError as exc:
                raise InputError(exc.reason, field=f"replies[{i}]") from exc
    return out
