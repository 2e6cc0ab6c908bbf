"""Canonical JSON for messages: the ledger's persisted body format (a documented contract).

``to_dict`` emits only non-default fields, keys sorted by :func:`canonical_json`, so the same
message always gives the same bytes and the same sha256. ``MESSAGE_SCHEMA`` is written with
every body; readers accept every version up to their own.

Format (version 1)::

    {"v": 1, "role": "assistant", "name"?: str, "parts": [{"kind": "text", "text": ...}, ...]}

A part is its dataclass fields minus defaults; ``cache`` is ``{"type", "ttl"?}``; a tool
result's ``content`` is a string or a list of ``text`` / ``media`` / ``opaque`` parts. An
``opaque`` part keeps a provider's block as JSON *text* (``raw``), so its key order survives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import Any, cast

import orjson

from ._parts import (
    PART_TYPES,
    CacheHint,
    Message,
    Part,
    ResultBlock,
    Role,
    ToolResult,
)

MESSAGE_SCHEMA = 1


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is, lone surrogates escaped, 64-bit integers.

    orjson writes exactly what ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` writes (a property test pins that) at a tenth of the cost; it refuses
    lone surrogates, which real tool output decoded with ``surrogateescape`` can contain, so
    those bodies take the slow path and keep each surrogate as a ``\\uXXXX`` escape, which
    decodes back to the same string and keeps the body valid UTF-8 for SQLite.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            # Integers beyond 64 bits would not read back as integers: refuse them here.
            raise ValueError(f"cannot store as canonical JSON: {exc}") from exc
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def load_json(text: str | bytes) -> Any:
    """Parse JSON fast; lone-surrogate escapes (which orjson refuses) take the slow path."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


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


_INIT_NAMES: dict[type, frozenset[str]] = {}


def _init_names(cls: type) -> frozenset[str]:
    found = _INIT_NAMES.get(cls)
    if found is None:
        found = frozenset(f.name for f in dataclasses.fields(cls) if f.init)
        _INIT_NAMES[cls] = found
    return found


def part_to_dict(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": part.kind}
    for name, default in _fields(type(part)):
        value = getattr(part, name)
        if default is not dataclasses.MISSING and value == default:
            continue
        if isinstance(value, CacheHint):
            value = {"type": value.type} | ({"ttl": value.ttl} if value.ttl is not None else {})
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
    names = _init_names(cls)
    for key, value in data.items():
        if key == "kind":
            continue
        if key not in names:
            raise ValueError(f"unknown field {key!r} for part kind {kind!r}")
        if key == "cache" and value is not None:
            value = CacheHint(value.get("type", "ephemeral"), value.get("ttl"))
        elif cls is ToolResult and key == "content" and isinstance(value, list):
            value = tuple(cast(ResultBlock, part_from_dict(v)) for v in value)
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


def message_from_json(text: str | bytes) -> Message:
    return message_from_dict(load_json(text))
