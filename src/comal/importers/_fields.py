"""Typed access to the fields of a record, and small conversions every format needs.

Each accessor raises :class:`RecordError` naming the field, so a parser can validate a whole
record before it changes any state, and a fault names exactly what was wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from comal.messages import Media, Part, Text
from comal.messages.wire import URL_MEDIA_MIME

from ._base import RecordError


def _name(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def req(d: Mapping[str, Any], key: str, typ: type[Any], at: str = "") -> Any:
    if key not in d:
        raise RecordError(f"missing field {key!r}", _name(at, key))
    value = d[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise RecordError(f"{key!r} is {_kind(value)}, expected {typ.__name__}", _name(at, key))
    return value


def opt(d: Mapping[str, Any], key: str, typ: type[Any], at: str = "") -> Any:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise RecordError(f"{key!r} is {_kind(value)}, expected {typ.__name__}", _name(at, key))
    return value


def as_dict(value: Any, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"expected an object, got {_kind(value)}", at or None)
    return value


def json_text(value: Any) -> str:
    """Serialise a tool input object once, keeping the model's key order and characters."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text_parts(text: str | None) -> list[Part]:
    """A Text part for non-empty text (assistant turns often carry an empty string)."""
    return [Text(text)] if text else []


def media_from_url(url: str, detail: str | None = None) -> Media:
    """An image given by URL; a ``data:`` URL is split so the payload is stored inline."""
    if url.startswith("data:") and "," in url:
        header, data = url[5:].split(",", 1)
        mime = header.split(";", 1)[0] or "application/octet-stream"
        if header.endswith(";base64"):
            return Media(mime, data=data, detail=detail)
    return Media(URL_MEDIA_MIME, ref=url, detail=detail)
