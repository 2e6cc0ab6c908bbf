"""Canonical JSON for messages: the ledger's persisted body format (a documented contract).

``to_dict`` emits only non-default fields, keys sorted by :func:`canonical_json`, so the same
message always gives the same bytes and the same sha256. ``MESSAGE_SCHEMA`` is written with
every body; readers accept every version up to their own.

Format (version 1)::

    {"v": 1, "role": "assistant", "name"?: str, "parts": [{"kind": "text", "text": ...}, ...]}

A part is its dataclass fields minus defaults; ``cache`` is ``{"type", "ttl"?}``; a tool
result's ``content`` is a string or a list of ``text`` / ``media`` parts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, cast

from ._parts import (
    PART_TYPES,
    CacheHint,
    Media,
    Message,
    Part,
    Role,
    Text,
    ToolResult,
)

MESSAGE_SCHEMA = 1


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


_FIELDS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, default) of a part class's fields, computed once: this runs on every append."""
    found = _FIELDS.get(cls)
    if found is None:
        found = tuple((f.name, f.default) for f in dataclasses.fields(cls) if f.name != "kind")
        _FIELDS[cls] = found
    return found


def part_to_dict(part: Part | Text | Media) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": part.kind}
    for name, default in _fields(type(part)):
        value = getattr(part, name)
        if default is not dataclasses.MISSING and value == default:
            continue
        if isinstance(value, CacheHint):
            value = {"type": value.type} | ({"ttl": value.ttl} if value.ttl else {})
        elif isinstance(part, ToolResult) and name == "content" and not isinstance(value, str):
            value = [part_to_dict(p) for p in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def part_from_dict(data: dict[str, Any]) -> Part:
    kind = data.get("kind")
    cls = PART_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown part kind {kind!r}")
    kwargs: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    for key, value in data.items():
        if key == "kind":
            continue
        if key not in names:
            raise ValueError(f"unknown field {key!r} for part kind {kind!r}")
        if key == "cache" and value is not None:
            value = CacheHint(value.get("type", "ephemeral"), value.get("ttl"))
        elif cls is ToolResult and key == "content" and isinstance(value, list):
            value = tuple(cast("Text | Media", part_from_dict(v)) for v in value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[key] = value
    return cls(**kwargs)


def message_to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {
        "v": MESSAGE_SCHEMA,
        "role": message.role.value,
        "parts": [part_to_dict(p) for p in message.parts],
    }
    if message.name is not None:
        out["name"] = message.name
    return out


def message_from_dict(data: dict[str, Any]) -> Message:
    version = data.get("v", 1)
    if not isinstance(version, int) or version > MESSAGE_SCHEMA:
        raise ValueError(
            f"message body schema v{version} is newer than this comal (v{MESSAGE_SCHEMA}); "
            "upgrade comal to read it"
        )
    return Message(
        Role(data["role"]),
        tuple(part_from_dict(p) for p in data["parts"]),
        data.get("name"),
    )


def message_to_json(message: Message) -> str:
    return canonical_json(message_to_dict(message))


def message_from_json(text: str) -> Message:
    return message_from_dict(json.loads(text))
