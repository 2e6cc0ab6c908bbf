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
from ...messages.wire import PROVIDER_ANTHROPIC, WireProtocol, from_anthropic_message, wire_protocol
from .._base import finish_response
from .._errors import ProviderError, error_for_status
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

# The failures a script may inject by name; each protocol answers them in its own words
# (:attr:`~comal.messages.wire.WireProtocol.failures`).
ERROR_KINDS: Final = ("context_length", "rate_limit", "server", "overloaded", "bad_request", "auth")


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
    anthropic = wire_protocol(PROVIDER_ANTHROPIC)  # a script is in Anthropic's words
    return finish_response(
        message,
        anthropic.stop(raw_stop, None),
        raw_stop,
        dict(usage) if isinstance(usage, Mapping) else None,
        str(entry.get("model") or model),
        entry.get("id"),
        protocol="scripted",
        usage_protocol=anthropic.usage,
    )


def error_reply(
    entry: Mapping[str, Any], protocol: WireProtocol
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """``(status, headers, body)`` of an error entry in ``protocol``'s real error shape (a
    protocol without its own words for a failure gets its error shape around Anthropic's)."""
    error = entry["error"]
    if isinstance(error, Mapping):
        headers = {str(k): str(v) for k, v in (error.get("headers") or {}).items()}
        return int(error["status"]), headers, dict(error.get("body") or {})
    headers = {"retry-after": "0"} if error == "rate_limit" else {}
    flavor = entry.get("flavor")
    found = protocol.failures.get(f"{error}/{flavor}") or protocol.failures.get(error)
    if found is None:
        status, own = wire_protocol(PROVIDER_ANTHROPIC).failures[error]
        message = str(own.get("error", {}).get("message", error))
        return status, headers, protocol.error(status, message)
    status, body = found
    return status, headers, json.loads(json.dumps(body))  # the caller's own copy


def error_from_entry(entry: Mapping[str, Any], provider: str) -> ProviderError:
    """The error a provider raises for an error entry (as if retries were exhausted)."""
    status, headers, body = error_reply(entry, wire_protocol(PROVIDER_ANTHROPIC))
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
