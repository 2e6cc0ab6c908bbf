"""Plain provider message lists, and the block converters the agent formats reuse.

``openai``: a JSON list of OpenAI Chat messages, or ``{"messages": [...], "model"?, "tools"?}``.
``anthropic``: ``{"system"?, "messages": [...]}`` in the Anthropic Messages shape, or a bare list.
Claude Code reuses the Anthropic block converter; SWE-agent and mini-swe-agent reuse the OpenAI
one, since their logs are those wire shapes with extra keys.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

from comal.messages import CacheHint, Media, Part, Reasoning, Role, Text, ToolCall, ToolResult
from comal.messages.wire import PROVIDER_ANTHROPIC, PROVIDER_OPENAI_CHAT, URL_MEDIA_MIME

from ._base import Faults, ImportedSession, RecordError, SessionBuilder
from ._fields import as_dict, json_text, media_from_url, opt, req, text_parts
from ._jsonio import JsonDoc, read_json, records

# --- OpenAI Chat ---------------------------------------------------------------------------

OPENAI_ROLES = {
    "system": Role.SYSTEM,
    "developer": Role.DEVELOPER,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
}


def openai_content(content: Any, at: str) -> list[Text | Media]:
    """``content`` of an OpenAI message: a string, null, or a list of typed parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        raise RecordError(f"content is {type(content).__name__}, expected str or list", at)
    out: list[Text | Media] = []
    for k, raw in enumerate(content):
        where = f"{at}[{k}]"
        part = as_dict(raw, where)
        kind = req(part, "type", str, where)
        if kind in ("text", "input_text", "output_text"):
            out.append(Text(req(part, "text", str, where)))
        elif kind == "refusal":
            out.append(Text(req(part, "refusal", str, where)))
        elif kind == "image_url":
            image = part["image_url"]
            if isinstance(image, str):
                out.append(media_from_url(image))
            else:
                image = as_dict(image, f"{where}.image_url")
                out.append(
                    media_from_url(
                        req(image, "url", str, f"{where}.image_url"),
                        opt(image, "detail", str, f"{where}.image_url"),
                    )
                )
        elif kind == "input_audio":
            audio = as_dict(part.get("input_audio"), f"{where}.input_audio")
            fmt = req(audio, "format", str, f"{where}.input_audio")
            out.append(Media(f"audio/{fmt}", data=req(audio, "data", str, f"{where}.input_audio")))
        elif kind == "file":
            file = as_dict(part.get("file"), f"{where}.file")
            name = opt(file, "filename", str, f"{where}.file")
            mime = (mimetypes.guess_type(name)[0] if name else None) or "application/octet-stream"
            out.append(Media(mime, ref=file.get("file_id") or name, data=file.get("file_data")))
        else:
            raise RecordError(f"unknown content part type {kind!r}", f"{where}.type")
    return out


def openai_reasoning(msg: dict[str, Any], at: str) -> list[Part]:
    """Reasoning an OpenAI-compatible gateway returned next to the content.

    LiteLLM gives Anthropic thinking as ``thinking_blocks`` (with signatures, which must go back
    unchanged) and repeats their text in ``reasoning_content``: prefer the blocks.
    """
    blocks = opt(msg, "thinking_blocks", list, at)
    if blocks:
        out: list[Part] = []
        for k, raw in enumerate(blocks):
            block = as_dict(raw, f"{at}.thinking_blocks[{k}]")
            out.append(anthropic_block(block, f"{at}.thinking_blocks[{k}]"))
        return out
    text = opt(msg, "reasoning_content", str, at) or opt(msg, "reasoning", str, at)
    return [Reasoning(text, provider=PROVIDER_OPENAI_CHAT)] if text else []


def openai_tool_calls(msg: dict[str, Any], at: str, legacy_id: str) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for k, raw in enumerate(opt(msg, "tool_calls", list, at) or []):
        where = f"{at}.tool_calls[{k}]"
        call = as_dict(raw, where)
        cid = req(call, "id", str, where)
        if call.get("type") == "custom":
            custom = as_dict(call.get("custom"), f"{where}.custom")
            calls.append(
                ToolCall(
                    cid,
                    req(custom, "name", str, f"{where}.custom"),
                    req(custom, "input", str, f"{where}.custom"),
                    call_type="custom",
                )
            )
            continue
        fn = as_dict(call.get("function"), f"{where}.function")
        args = fn.get("arguments")
        if not isinstance(args, str):
            # Some loggers store the parsed object; it is serialised once, in the model's order.
            args = json_text(as_dict(args, f"{where}.function.arguments"))
        calls.append(ToolCall(cid, req(fn, "name", str, f"{where}.function"), args))
    legacy = opt(msg, "function_call", dict, at)
    if legacy:
        name = req(legacy, "name", str, f"{at}.function_call")
        calls.append(
            ToolCall(legacy_id, name, req(legacy, "arguments", str, f"{at}.function_call"))
        )
    return calls


def openai_result_content(content: Any, at: str) -> str | tuple[Text | Media, ...]:
    """A tool result's content exactly: a string stays a string, parts become a tuple."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return tuple(openai_content(content, at))


def add_openai(
    b: SessionBuilder, msg: dict[str, Any], at: Any, index: int, legacy: list[str]
) -> int | None:
    """Add one OpenAI Chat message; ``legacy`` holds the id of an open ``function_call``.

    Returns the index of the assistant message added, if any.
    """
    role = req(msg, "role", str)
    name = opt(msg, "name", str)
    if role == "assistant":
        legacy_id = f"pos-{index}"
        calls = openai_tool_calls(msg, "", legacy_id)
        parts: list[Part] = [
            *openai_reasoning(msg, ""),
            *openai_content(msg.get("content"), "content"),
        ]
        parts = [p for p in parts if not (isinstance(p, Text) and not p.text)]
        parts += text_parts(opt(msg, "refusal", str))
        legacy[:] = [legacy_id] if msg.get("function_call") else []
        return b.add(Role.ASSISTANT, [*parts, *calls], at=at, name=name)
    if role == "tool":
        cid = req(msg, "tool_call_id", str)
        b.tool(
            ToolResult(cid, openai_result_content(msg.get("content"), "content"), name=name), at=at
        )
    elif role == "function":
        if not legacy:
            raise RecordError("a function result with no function_call before it", "role")
        content = openai_result_content(msg.get("content"), "content")
        b.tool(ToolResult(legacy.pop(), content, name=name), at=at)
    elif role in OPENAI_ROLES:
        b.add(
            OPENAI_ROLES[role],
            list(openai_content(msg.get("content"), "content")),
            at=at,
            name=name,
        )
    else:
        raise RecordError(f"unknown role {role!r}", "role")
    return None


# --- Anthropic Messages ---------------------------------------------------------------------


def _cache(block: dict[str, Any], at: str) -> CacheHint | None:
    cc = opt(block, "cache_control", dict, at)
    return CacheHint(cc.get("type", "ephemeral"), cc.get("ttl")) if cc else None


def _anthropic_media(block: dict[str, Any], at: str) -> Media:
    source = as_dict(block.get("source"), f"{at}.source")
    kind = req(source, "type", str, f"{at}.source")
    mime = opt(source, "media_type", str, f"{at}.source")
    if kind == "base64":
        return Media(
            mime or "application/octet-stream", data=req(source, "data", str, f"{at}.source")
        )
    if kind == "url":
        url = req(source, "url", str, f"{at}.source")
        return Media(mime or mimetypes.guess_type(url)[0] or URL_MEDIA_MIME, ref=url)
    if kind == "file":
        return Media(
            mime or "application/octet-stream", ref=req(source, "file_id", str, f"{at}.source")
        )
    raise RecordError(f"unknown media source type {kind!r}", f"{at}.source.type")


def anthropic_block(block: dict[str, Any], at: str) -> Part:
    """One Anthropic content block as a part (a ``tool_result`` becomes a ToolResult)."""
    kind = req(block, "type", str, at)
    if kind == "text":
        return Text(req(block, "text", str, at), _cache(block, at))
    if kind == "thinking":
        return Reasoning(
            req(block, "thinking", str, at),
            signature=opt(block, "signature", str, at),
            provider=PROVIDER_ANTHROPIC,
        )
    if kind == "redacted_thinking":
        return Reasoning(
            data=req(block, "data", str, at), redacted=True, provider=PROVIDER_ANTHROPIC
        )
    if kind == "tool_use":
        inp = block.get("input", {})
        if not isinstance(inp, dict):
            raise RecordError(f"'input' is {type(inp).__name__}, expected dict", f"{at}.input")
        return ToolCall(
            req(block, "id", str, at),
            req(block, "name", str, at),
            json_text(inp),
            cache=_cache(block, at),
        )
    if kind == "tool_result":
        raw = block.get("content")
        content: str | tuple[Text | Media, ...]
        if raw is None or isinstance(raw, str):
            content = raw or ""
        elif isinstance(raw, list):
            items: list[Text | Media] = []
            for k, item in enumerate(raw):
                part = anthropic_block(as_dict(item, f"{at}.content[{k}]"), f"{at}.content[{k}]")
                if not isinstance(part, (Text, Media)):
                    raise RecordError(
                        "a tool result may hold only text and media", f"{at}.content[{k}]"
                    )
                items.append(part)
            content = tuple(items)
        else:
            raise RecordError(
                f"'content' is {type(raw).__name__}, expected str or list", f"{at}.content"
            )
        is_error = block.get("is_error") or False
        if not isinstance(is_error, bool):
            raise RecordError("'is_error' is not a boolean", f"{at}.is_error")
        return ToolResult(
            req(block, "tool_use_id", str, at), content, is_error, cache=_cache(block, at)
        )
    if kind in ("image", "document"):
        source = block.get("source")
        if kind == "document" and isinstance(source, dict) and source.get("type") == "text":
            return Text(req(source, "data", str, f"{at}.source"), _cache(block, at))
        return _anthropic_media(block, at)
    raise RecordError(f"unknown content block type {kind!r}", f"{at}.type")


def anthropic_parts(content: Any, at: str) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)]
    if not isinstance(content, list):
        kind = "null" if content is None else type(content).__name__
        raise RecordError(f"content is {kind}, expected str or list", at)
    return [anthropic_block(as_dict(b, f"{at}[{k}]"), f"{at}[{k}]") for k, b in enumerate(content)]


def add_anthropic(b: SessionBuilder, role: Role, parts: list[Part], at: Any) -> int | None:
    """Add parts of one Anthropic message: each tool result becomes its own TOOL message (in
    block order), the other blocks of a user turn stay together. Returns the assistant index."""
    if role is Role.ASSISTANT:
        if any(isinstance(p, ToolResult) for p in parts):
            raise RecordError("an assistant message holds a tool_result block", "content")
        return b.add(role, parts, at=at)
    run: list[Part] = []
    for part in parts:
        if isinstance(part, ToolResult):
            if run:
                b.add(role, run, at=at)
                run = []
            b.tool(part, at=at)
        elif isinstance(part, ToolCall):
            raise RecordError("a user message holds a tool_use block", "content")
        else:
            run.append(part)
    if run:
        b.add(role, run, at=at)
    return None


# --- loaders --------------------------------------------------------------------------------

# How one record of ``messages`` is added: (builder, record, where, index, open legacy calls).
_Add = Callable[[SessionBuilder, dict[str, Any], Any, int, list[str]], object]


def _add_anthropic_record(
    b: SessionBuilder, msg: dict[str, Any], at: Any, index: int, legacy: list[str]
) -> None:
    role = req(msg, "role", str)
    if role not in ("user", "assistant"):
        raise RecordError(f"role {role!r} is not user or assistant", "role")
    add_anthropic(b, Role(role), anthropic_parts(msg.get("content"), "content"), at)


def _sessions(
    path: Path, faults: Faults, fmt: str, add: _Add, system: bool = False
) -> list[ImportedSession]:
    """``system``: the format has a top-level ``system`` prompt (Anthropic's)."""
    out: list[ImportedSession] = []
    for n, doc in enumerate(read_json(path, faults)):
        out.append(_one(path, faults, doc, n, fmt, add, system))
    return out


def _one(
    path: Path, faults: Faults, doc: JsonDoc, n: int, fmt: str, add: _Add, reads_system: bool
) -> ImportedSession:
    value = doc.value
    faults.locate = doc.line_of
    b = SessionBuilder(faults)
    meta: dict[str, Any] = {}
    base: tuple[str | int, ...] = ()
    if isinstance(value, dict):
        if not isinstance(value.get("messages"), list):
            raise faults.fatal(
                "expected a list of messages or an object with 'messages'", field="messages"
            )
        base = ("messages",)
        meta = {k: value[k] for k in ("model", "tools") if k in value}
        if reads_system and value.get("system") is not None:
            try:
                system = anthropic_parts(value["system"], "system")
                b.add(Role.SYSTEM, system, at=("system",))
            except RecordError as exc:
                faults.bad(exc.reason, at=(), field=exc.field)
        seq = value["messages"]
    elif isinstance(value, list):
        seq = value
    else:
        raise faults.fatal("expected a list of messages or an object with 'messages'")
    legacy: list[str] = []
    for i, raw in records(doc, seq, base, faults):
        at = (*base, i)
        try:
            add(b, as_dict(raw, ""), at, i, legacy)
        except RecordError as exc:
            faults.bad(exc.reason, at=at, field=exc.field)
    key = path.stem if n == 0 else f"{path.stem}#{n}"
    return b.finish(source=str(path), format=fmt, key=key, meta=meta)


def load_openai(path: Path, faults: Faults) -> list[ImportedSession]:
    return _sessions(path, faults, "openai", add_openai)


def load_anthropic(path: Path, faults: Faults) -> list[ImportedSession]:
    return _sessions(path, faults, "anthropic", _add_anthropic_record, system=True)
