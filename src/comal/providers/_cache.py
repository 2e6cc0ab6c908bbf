"""Prompt-cache breakpoints (CCH-1): where ``cache_control`` goes so the prefix stays stable.

Anthropic caches a request's prefix in the order tools → system → messages, up to each block
marked with ``cache_control`` (at most four markers). The cache is hit only when the bytes before a
marker are identical to an earlier request's, so placement is deterministic: the markers follow
from the request alone, never from the clock or from earlier calls.

Placement works on canonical messages before conversion, so the wire converter stays the only
code that writes the Anthropic format: hints already on parts are dropped, then one
:class:`~comal.messages.CacheHint` is put on the last markable part of the last message of the
stable prefix (a text, tool call or tool result; reasoning and media cannot carry one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..messages import CacheHint, Message, Part, Role, Text, ToolCall, ToolResult
from ._types import CachePolicy, ToolSpec

__all__ = ["cache_control", "mark_history", "strip_hints", "tool_params"]

_SYSTEM_ROLES = (Role.SYSTEM, Role.DEVELOPER)


def _strip_part(part: Part) -> Part:
    if isinstance(part, ToolResult) and not isinstance(part.content, str):
        inner = tuple(
            dataclasses.replace(p, cache=None) if isinstance(p, Text) else p for p in part.content
        )
        return dataclasses.replace(part, content=inner, cache=None)
    if isinstance(part, (Text, ToolCall, ToolResult)) and part.cache is not None:
        return dataclasses.replace(part, cache=None)
    return part


def strip_hints(messages: Sequence[Message]) -> list[Message]:
    """The messages without any cache hint (the adapter owns placement)."""
    out = []
    for msg in messages:
        parts = tuple(_strip_part(p) for p in msg.parts)
        out.append(msg if parts == msg.parts else Message(msg.role, parts, msg.name))
    return out


def _markable(part: Part) -> bool:
    if isinstance(part, Text):
        return part.text != ""  # Anthropic rejects cache_control on an empty text block
    return isinstance(part, (ToolCall, ToolResult))


def _mark(msg: Message, hint: CacheHint) -> Message | None:
    for j in range(len(msg.parts) - 1, -1, -1):
        part = msg.parts[j]
        if _markable(part):
            assert isinstance(part, (Text, ToolCall, ToolResult))
            marked = dataclasses.replace(part, cache=hint)
            return Message(msg.role, (*msg.parts[:j], marked, *msg.parts[j + 1 :]), msg.name)
    return None


def mark_history(messages: Sequence[Message], policy: CachePolicy) -> list[Message]:
    """``messages`` with the history breakpoint placed per ``policy`` (hints stripped first).

    The breakpoint goes on the last message of the stable prefix that can carry one; system
    messages are skipped, they are cached with the system prompt.
    """
    out = strip_hints(messages)
    end = len(out) if policy.stable_messages is None else min(policy.stable_messages, len(out))
    for i in range(end - 1, -1, -1):
        if out[i].role in _SYSTEM_ROLES:
            continue
        marked = _mark(out[i], policy.hint)
        if marked is not None:
            out[i] = marked
            break
    return out


def tool_params(
    tools: Sequence[ToolSpec], hint: CacheHint | None, schema_key: str
) -> list[dict[str, Any]]:
    """Tool definitions as flat ``{name, description, <schema_key>}`` dicts, the last one marked
    with ``hint``. Key order is fixed so the serialized tools are the same bytes every turn."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        item: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description"):
            item["description"] = tool["description"]
        item[schema_key] = dict(tool["input_schema"])
        out.append(item)
    if out and hint is not None:
        out[-1]["cache_control"] = cache_control(hint)
    return out


def cache_control(hint: CacheHint) -> dict[str, str]:
    """The wire form of a hint: ``{"type": "ephemeral"}``, with ``ttl`` when set."""
    control = {"type": hint.type}
    if hint.ttl is not None:
        control["ttl"] = hint.ttl
    return control
