"""Anthropic Messages requests ↔ canonical messages.

Normal form (round-trips exactly both ways):

- ``system`` ↔ one leading canonical system message. It is a string exactly when that message is
  one :class:`Text` without a cache hint, otherwise a list of ``text`` blocks; it is absent when
  there is no system message. Anthropic has one system prompt: several leading system or developer
  messages are merged into it (and read back as one system message); a system or developer message
  after the conversation started cannot be sent and raises :class:`~comal.errors.UserError`.
- With ``inline_system=True`` (both ways), the form Claude Code sends on ``/v1/messages?beta=true``:
  every system message stays where it is, as a ``{"role": "system", "content": ...}`` entry of
  ``messages`` (content in the same normal form as ``system``; text blocks only), and such entries
  read back as system messages in place. A developer message reads back as a system message.
- A ``user`` message with N ``tool_result`` blocks ↔ N canonical tool messages (one
  :class:`ToolResult` each) followed by one user message holding the remaining blocks, if any.
  Converting back merges a run of tool messages and a directly following user message into one
  user message, results first. Separate wire user messages that this would merge are not normal
  form, nor is text placed before a tool result (it reads back after the results).
- Other ``user`` content is a string exactly when the message is one plain :class:`Text`; a list
  of one uncached text block therefore reads back as a string. ``assistant`` content is always a
  list (a string reads back as one text block).
- Blocks: ``text`` ↔ :class:`Text`; ``thinking {thinking, signature?}`` and ``redacted_thinking
  {data}`` ↔ :class:`Reasoning` tagged ``"anthropic"`` (signature and data kept byte for byte);
  ``tool_use`` ↔ :class:`ToolCall`; ``tool_result {tool_use_id, content, is_error?}`` ↔
  :class:`ToolResult` (string content byte for byte; a list stays a list; ``is_error`` written only
  when true, so ``is_error: false`` and a missing ``content`` read back as absent and ``""``);
  ``image`` / ``document`` with a ``base64`` source ↔ inline :class:`Media`, with a ``url`` source
  ↔ media by reference (mime ``"image/*"`` for images, ``"application/pdf"`` for documents).
- ``cache_control`` ↔ :class:`CacheHint` on text, tool use and tool result blocks.

Tool arguments: ``ToolCall.arguments`` is JSON text while ``tool_use.input`` is an object. Writing
parses the text; reading serialises ``input`` with ``json.dumps(input, ensure_ascii=False,
separators=(",", ":"))``. So the text-level form of arguments is normalised (whitespace, escapes,
number spelling, duplicate keys: OpenAI's ``{"a": 1.0E2}`` comes back as ``{"a":100.0}``) while the
JSON value is kept. Arguments that are not a JSON object (invalid JSON, or a custom tool's raw
input) do not crash: they are sent as ``{"_raw_arguments": text}`` and read back as that exact
text. An object that already has exactly that shape is wrapped once more, so the mapping stays
reversible for every text.

Kept whole: a block no typed part carries exactly is an :class:`Opaque` part holding its JSON
(``document`` with a text, content or file source, or a ``title`` / ``context`` / ``citations``;
a ``text`` block with ``citations``; a ``search_result``, ``server_tool_use``, any type this
module does not know), in a message or a tool result's content, and is written back exactly
(keys in their order). An opaque part of another format is sent as its placeholder text. Keys
whose value is null read as absent.

Not carried: ``Message.name``, ``ToolResult.name``, ``Media.detail`` / ``size``,
``cache_control`` on image and document blocks (``Media`` has no cache field), a tool call's
``call_type``, and ``Reasoning`` summary / id. Reasoning tagged for another provider is not sent;
engine parts are sent as text. Unknown keys on thinking, tool use and tool result blocks are
ignored. A role other than ``user`` and ``assistant``, a block without a string ``type`` and a
``tool_result`` outside a user message are errors, as the API has them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Required, TypeAlias, TypedDict, cast

from ...errors import UserError
from .._parts import (
    CacheHint,
    Media,
    Message,
    Opaque,
    Part,
    Reasoning,
    ResultBlock,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from ._render import render_opaque
from ._shared import (
    PROVIDER_ANTHROPIC,
    URL_MEDIA_MIME,
    CacheControl,
    Reader,
    bare,
    cache_to_wire,
    keep,
    kept,
    no_source,
    plain,
    sends_reasoning,
    unsupported,
)

FORMAT = "Anthropic Messages"
RAW_ARGUMENTS_KEY = "_raw_arguments"
URL_DOCUMENT_MIME = "application/pdf"
_read = Reader(FORMAT)
_SYSTEM_ROLES = (Role.SYSTEM, Role.DEVELOPER)


class AnthropicSource(TypedDict, total=False):
    type: Required[str]  # "base64" | "url"
    media_type: str
    data: str
    url: str


class AnthropicBlock(TypedDict, total=False):
    type: Required[str]
    text: str
    thinking: str
    signature: str
    data: str
    id: str
    name: str
    input: dict[str, Any]
    tool_use_id: str
    content: str | list[AnthropicBlock]
    is_error: bool
    source: AnthropicSource
    cache_control: CacheControl


AnthropicContent: TypeAlias = str | list[AnthropicBlock]


class AnthropicMessage(TypedDict):
    role: str
    content: AnthropicContent


class AnthropicRequest(TypedDict, total=False):
    system: AnthropicContent
    messages: Required[list[AnthropicMessage]]


# -- canonical → wire ---------------------------------------------------------------------------


def to_anthropic(messages: Sequence[Message], *, inline_system: bool = False) -> AnthropicRequest:
    """Canonical messages as the ``system`` and ``messages`` of a Messages API request; with
    ``inline_system`` every system message is a ``role: "system"`` entry where it stands."""
    n, i = len(messages), 0
    system: list[Part] | None = None
    while i < n and messages[i].role in _SYSTEM_ROLES and not inline_system:
        system = [*(system or []), *messages[i].parts]
        i += 1
    out: list[AnthropicMessage] = []
    while i < n:
        msg = messages[i]
        i += 1
        if msg.role is Role.TOOL:
            blocks = _blocks(msg.parts, msg.role)
            while i < n and messages[i].role is Role.TOOL:
                blocks += _blocks(messages[i].parts, Role.TOOL)
                i += 1
            if i < n and messages[i].role is Role.USER:
                blocks += _blocks(messages[i].parts, Role.USER)
                i += 1
            out.append(AnthropicMessage(role="user", content=blocks))
        elif msg.role is Role.USER:
            out.append(AnthropicMessage(role="user", content=_content(msg.parts, msg.role)))
        elif msg.role is Role.ASSISTANT:
            out.append(AnthropicMessage(role="assistant", content=_blocks(msg.parts, msg.role)))
        elif inline_system:
            out.append(AnthropicMessage(role="system", content=_content(msg.parts, Role.SYSTEM)))
        else:
            raise UserError(
                f"message {i - 1} is a {msg.role.value} message after the conversation started, "
                "and Anthropic has a single system prompt; move it to the start or send it as a "
                "user message"
            )
    if system is None:
        return AnthropicRequest(messages=out)
    return AnthropicRequest(system=_content(system, Role.SYSTEM), messages=out)


def _content(parts: Sequence[Part], role: Role) -> AnthropicContent:
    flat = [plain(p, PROVIDER_ANTHROPIC) for p in parts]
    if len(flat) == 1 and isinstance(flat[0], Text) and flat[0].cache is None:
        return flat[0].text
    return _blocks(flat, role)


def _blocks(parts: Sequence[Part], role: Role) -> list[AnthropicBlock]:
    blocks: list[AnthropicBlock] = []
    for part in (plain(p, PROVIDER_ANTHROPIC) for p in parts):
        if role is Role.SYSTEM and not isinstance(part, Text):
            unsupported(FORMAT, f"{part.kind} parts in the system prompt", "send it as text")
        if isinstance(part, Reasoning) and not sends_reasoning(part, PROVIDER_ANTHROPIC):
            continue
        blocks.append(_block(part))
    return blocks


def _block(part: Part) -> AnthropicBlock:
    if isinstance(part, Opaque):
        if part.format == PROVIDER_ANTHROPIC and not part.item:
            return cast(AnthropicBlock, kept(part))
        return AnthropicBlock(type="text", text=render_opaque(part))
    if isinstance(part, Text):
        block = AnthropicBlock(type="text", text=part.text)
    elif isinstance(part, Reasoning):
        if part.redacted:
            return AnthropicBlock(type="redacted_thinking", data=part.data or "")
        block = AnthropicBlock(type="thinking", thinking=part.text)
        if part.signature is not None:
            block["signature"] = part.signature
        return block
    elif isinstance(part, ToolCall):
        input_ = _input_to_wire(part.arguments)
        block = AnthropicBlock(type="tool_use", id=part.id, name=part.name, input=input_)
    elif isinstance(part, ToolResult):
        content = part.content
        block = AnthropicBlock(
            type="tool_result",
            tool_use_id=part.call_id,
            content=content if isinstance(content, str) else [_block(p) for p in content],
        )
        if part.is_error:
            block["is_error"] = True
    elif isinstance(part, Media):
        return _media_to_wire(part)
    else:  # engine parts never get here: plain() rendered them as text
        unsupported(FORMAT, f"{part.kind} parts", "render it with render_engine_part")
    if part.cache is not None:
        block["cache_control"] = cache_to_wire(part.cache)
    return block


def _media_to_wire(media: Media) -> AnthropicBlock:
    kind = "image" if media.mime.startswith("image/") else "document"
    if media.data is not None:
        source = AnthropicSource(type="base64", media_type=media.mime, data=media.data)
    elif media.ref is not None:
        source = AnthropicSource(type="url", url=media.ref)
    else:
        no_source(media)
    return AnthropicBlock(type=kind, source=source)


def _is_raw_wrapper(value: Mapping[str, Any]) -> bool:
    return len(value) == 1 and isinstance(value.get(RAW_ARGUMENTS_KEY), str)


def _input_to_wire(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and not _is_raw_wrapper(value):
        return value
    return {RAW_ARGUMENTS_KEY: arguments}


# -- wire → canonical ---------------------------------------------------------------------------


def from_anthropic(request: Mapping[str, Any], *, inline_system: bool = False) -> list[Message]:
    """The ``system`` and ``messages`` of a Messages API request as canonical messages; with
    ``inline_system`` a ``role: "system"`` entry of ``messages`` is a system message there."""
    request = _read.mapping(request, "request")
    out: list[Message] = []
    system = request.get("system")
    if system is not None:
        out.append(Message(Role.SYSTEM, _system_from_wire(system)))
    for i, raw in enumerate(_read.array(request.get("messages"), "messages")):
        where = f"messages[{i}]"
        msg = _read.mapping(raw, where)
        role = _read.string(msg, "role", where)
        if role == "assistant":
            out.append(
                Message(Role.ASSISTANT, _parts(msg.get("content"), f"{where}.content", role))
            )
        elif role == "user":
            out.extend(_user_from_wire(_parts(msg.get("content"), f"{where}.content", role)))
        elif role == "system" and inline_system:
            out.append(Message(Role.SYSTEM, _system_from_wire(msg.get("content"), where)))
        else:
            _read.fail(f"{where}.role", f"unknown role {role!r}")
    return out


def from_anthropic_message(message: Mapping[str, Any]) -> Message:
    """One assistant response (``{"content": [...]}``, e.g. an API response body)."""
    message = _read.mapping(message, "message")
    role = message.get("role", "assistant")
    if role != "assistant":
        _read.fail("role", f"expected an assistant response, got role {role!r}")
    return Message(Role.ASSISTANT, _parts(message.get("content"), "content", "assistant"))


def _user_from_wire(parts: tuple[Part, ...]) -> list[Message]:
    results = [p for p in parts if isinstance(p, ToolResult)]
    rest = tuple(p for p in parts if not isinstance(p, ToolResult))
    out = [Message(Role.TOOL, (r,)) for r in results]
    if rest or not results:
        out.append(Message(Role.USER, rest))
    return out


def _system_from_wire(value: object, where: str = "") -> tuple[Part, ...]:
    key = f"{where}.content" if where else "system"
    parts = _parts(value, key, "system")
    for j, part in enumerate(parts):
        if not isinstance(part, Text):
            _read.fail(f"{key}[{j}].type", "a system message holds text blocks only")
    return parts


def _parts(value: object, key: str, role: str) -> tuple[Part, ...]:
    if isinstance(value, str):
        return (Text(value),)
    blocks = _read.array(value, key)
    return tuple(_part_from_wire(b, f"{key}[{j}]", role) for j, b in enumerate(blocks))


def _part_from_wire(value: object, where: str, role: str) -> Part:
    block = _read.mapping(value, where)
    kind = block.get("type")
    if not isinstance(kind, str):
        _read.fail(f"{where}.type", "a content block needs a string type")
    cache = _read.cache(block, where)
    if kind == "text":
        typed = Text(_read.string(block, "text", where), cache)
        return typed if set(bare(block, "cache_control")) == {"type", "text"} else _keep(block)
    if kind == "thinking":
        signature = _read.opt_string(block, "signature", where)
        text = _read.string(block, "thinking", where)
        return Reasoning(text, signature=signature, provider=PROVIDER_ANTHROPIC)
    if kind == "redacted_thinking":
        data = _read.string(block, "data", where)
        return Reasoning(data=data, redacted=True, provider=PROVIDER_ANTHROPIC)
    if kind == "tool_use":
        input_ = _read.mapping(block.get("input"), f"{where}.input")
        arguments = (
            input_[RAW_ARGUMENTS_KEY]
            if _is_raw_wrapper(input_)
            else json.dumps(input_, ensure_ascii=False, separators=(",", ":"))
        )
        name = _read.string(block, "name", where)
        return ToolCall(_read.string(block, "id", where), name, arguments, cache=cache)
    if kind == "tool_result":
        if role != "user":
            _read.fail(f"{where}.type", f"a tool_result block in a {role} message")
        return _result_from_wire(block, where, cache)
    if kind in ("image", "document"):
        media = _media_from_wire(block)
        exact = media is not None and _media_to_wire(media) == bare(block, "cache_control")
        return media if media is not None and exact else _keep(block)
    return _keep(block)


def _keep(block: Mapping[str, Any]) -> Opaque:
    return keep(block, PROVIDER_ANTHROPIC)


def _result_from_wire(block: Mapping[str, Any], where: str, cache: CacheHint | None) -> ToolResult:
    call_id = _read.string(block, "tool_use_id", where)
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        _read.fail(f"{where}.is_error", "expected true or false")
    value = block.get("content", "")
    content: str | tuple[ResultBlock, ...]
    if isinstance(value, str):
        content = value
    else:
        inner: list[ResultBlock] = []
        for j, raw in enumerate(_read.array(value, f"{where}.content")):
            part = _part_from_wire(raw, f"{where}.content[{j}]", "tool_result")
            if not isinstance(part, (Text, Media, Opaque)):
                # A thinking or tool_use block inside a result: kept, not interpreted.
                part = _keep(raw)
            inner.append(part)
        content = tuple(inner)
    return ToolResult(call_id, content, is_error, cache=cache)


def _media_from_wire(block: Mapping[str, Any]) -> Media | None:
    """The block as media, or ``None`` when :class:`Media` cannot hold it (it is kept whole)."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    kind = source.get("type")
    if kind == "base64" and isinstance(source.get("media_type"), str):
        data = source.get("data")
        return Media(source["media_type"], data=data) if isinstance(data, str) else None
    if kind == "url" and isinstance(source.get("url"), str):
        mime = URL_MEDIA_MIME if block.get("type") == "image" else URL_DOCUMENT_MIME
        return Media(mime, ref=source["url"])
    return None
