"""Pieces the three converters share: checked reads of untyped JSON, cache hints, media URLs.

Wire input is untrusted JSON. Every read goes through :class:`Reader`, so a malformed payload fails
with an :class:`~comal.errors.InputError` naming the exact path (``messages[3].content[0].type``)
instead of a ``KeyError`` deep inside a converter. Keys a converter does not read are ignored: the
normal form of each format lists the keys that are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Required, TypedDict

from ...errors import InputError, UserError
from .._parts import CacheHint, Media, Opaque, Part, Reasoning, Text
from ._render import ENGINE_PARTS, render_engine_part, render_opaque

# ``Reasoning.provider`` tags written by each converter. Reasoning is sent back only to the provider
# that produced it (or untagged reasoning): signatures and encrypted content from one provider are
# meaningless, and often rejected, by another.
PROVIDER_OPENAI_CHAT = "openai_chat"
PROVIDER_OPENAI_RESPONSES = "openai_responses"
PROVIDER_ANTHROPIC = "anthropic"

# The mime type given to media known only by URL: the wire formats do not say what a URL holds.
URL_MEDIA_MIME = "image/*"

_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)


class CacheControl(TypedDict, total=False):
    type: Required[str]  # "ephemeral"
    ttl: str  # "5m" | "1h"


@dataclass(frozen=True, slots=True)
class Reader:
    """Checked access to one wire format's JSON; ``fmt`` names the format in error messages."""

    fmt: str

    def fail(self, where: str, problem: str) -> NoReturn:
        raise InputError(f"{problem}; check that the input is {self.fmt} data", field=where)

    def mapping(self, value: object, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(where, f"expected an object, got {type(value).__name__}")
        return value

    def array(self, value: object, where: str) -> Sequence[Any]:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            self.fail(where, f"expected an array, got {type(value).__name__}")
        return value

    def string(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        value = obj.get(key)
        if not isinstance(value, str):
            self.fail(f"{where}.{key}", f"expected a string, got {type(value).__name__}")
        return value

    def opt_string(self, obj: Mapping[str, Any], key: str, where: str) -> str | None:
        """A string that may be absent or null (both read as ``None``)."""
        if obj.get(key) is None:
            return None
        return self.string(obj, key, where)

    def cache(self, obj: Mapping[str, Any], where: str) -> CacheHint | None:
        value = obj.get("cache_control")
        if value is None:
            return None
        cc = self.mapping(value, f"{where}.cache_control")
        return CacheHint(
            self.string(cc, "type", f"{where}.cache_control"),
            self.opt_string(cc, "ttl", f"{where}.cache_control"),
        )


def media_from_url(url: str, detail: str | None) -> Media:
    """A ``data:`` URL becomes inline base64 media; any other URL a reference."""
    match = _DATA_URL.fullmatch(url)
    if match is not None:
        return Media(match[1], data=match[2], detail=detail)
    return Media(URL_MEDIA_MIME, ref=url, detail=detail)


def cache_to_wire(hint: CacheHint) -> CacheControl:
    out = CacheControl(type=hint.type)
    if hint.ttl is not None:
        out["ttl"] = hint.ttl
    return out


def media_to_url(media: Media) -> str:
    if media.data is not None:
        return f"data:{media.mime};base64,{media.data}"
    if media.ref is not None:
        return media.ref
    no_source(media)


def no_source(media: Media) -> NoReturn:
    raise UserError(
        f"media of type {media.mime!r} has neither data nor a reference; "
        "resolve a ledger blob to data or a URL before converting"
    )


def sends_reasoning(part: Reasoning, provider: str) -> bool:
    """Whether ``part`` goes to ``provider``: its own reasoning and untagged reasoning do."""
    return part.provider is None or part.provider == provider


def plain(part: Part, provider: str | None = None) -> Part:
    """Engine parts become text blocks, and so does an opaque part of another format than
    ``provider``'s (its placeholder); every other part is returned unchanged."""
    if isinstance(part, ENGINE_PARTS):
        return Text(render_engine_part(part))
    if isinstance(part, Opaque) and part.format != provider:
        return Text(render_opaque(part))
    return part


def keep(value: object, provider: str, *, item: bool = False) -> Opaque:
    """A wire value no typed part carries, kept whole: its JSON text, keys in their order."""
    return Opaque(provider, json.dumps(value, ensure_ascii=False, separators=(",", ":")), item)


def kept(part: Opaque) -> Any:
    """The wire value an opaque part keeps."""
    return json.loads(part.raw)


def bare(block: Mapping[str, Any], *ignored: str) -> dict[str, Any]:
    """``block`` without ``ignored`` keys and without keys whose value is null (the wire's
    "absent"), to compare it with what a typed part writes back."""
    return {k: v for k, v in block.items() if v is not None and k not in ignored}


def unsupported(fmt: str, what: str, fix: str) -> NoReturn:
    raise UserError(f"{fmt} has no place for {what}; {fix}")
