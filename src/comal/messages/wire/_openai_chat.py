"""OpenAI Chat Completions messages ↔ canonical messages.

One wire message is one canonical message, in order. Normal form (round-trips exactly both ways):

- ``system`` / ``developer`` / ``user``: ``content`` is a string exactly when the message is one
  :class:`Text` without a cache hint, otherwise a list of ``text`` / ``image_url`` parts. A list
  holding one plain text part therefore reads back as a string (the model has no place for the
  difference). ``cache_control`` on a text part (the OpenRouter / LiteLLM extension) ↔
  :class:`CacheHint`.
- ``assistant``: ``reasoning_content`` (DeepSeek) ↔ one :class:`Reasoning` part tagged
  ``"openai_chat"``, placed first; ``content`` ↔ the text parts, by the same string-or-list rule
  (``null`` when there are none; ``""`` is ``Text("")``); ``tool_calls`` ↔ the :class:`ToolCall`
  parts, which come last.
  The wire has a fixed layout, so canonical parts in another order come back reordered.
  ``tool_calls: []`` and a missing ``content`` are not normal form: they read back as absent and
  ``null``. Custom tool calls use ``{"type": "custom", "custom": {"name", "input"}}``.
- ``tool``: ``tool_call_id`` and ``content`` (a string byte for byte, or a list of parts, which
  stays a list) ↔ one :class:`ToolResult`; ``name`` ↔ ``ToolResult.name``.
- ``name`` on other roles ↔ ``Message.name``.

Kept whole (:class:`Opaque`, written back exactly, keys in their order): a content part of a
type this module does not read (``input_audio``, ``file``, ``refusal``…), and a whole message
it cannot carry — the deprecated ``function`` role, or an assistant message with the deprecated
``function_call`` — as the only part of a user (``function``) or assistant message. An opaque
part of another format is sent as its placeholder text. Any other role is an error, as the
API has it.

Not carried (the wire has no place): ``ToolResult.is_error``, cache hints on tool calls and tool
results, ``Message.name`` on tool messages, the opaque fields of :class:`Reasoning` (signature,
data, summary, id). Reasoning tagged for another provider is not sent. Several reasoning parts are
joined with blank lines. Arguments given as a JSON object rather than text (some compatible
servers do this) are serialised compactly. Engine parts are sent as text
(:func:`render_engine_part`). Keys outside this list (``index``, ``refusal: null``, vendor
extras) are ignored on input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Required, TypeAlias, TypedDict, cast

from .._parts import (
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
    PROVIDER_OPENAI_CHAT,
    CacheControl,
    Reader,
    cache_to_wire,
    keep,
    kept,
    media_from_url,
    media_to_url,
    plain,
    sends_reasoning,
    unsupported,
)

FORMAT = "OpenAI Chat Completions"
_read = Reader(FORMAT)


class ChatImageURL(TypedDict, total=False):
    url: Required[str]
    detail: str


class ChatContentPart(TypedDict, total=False):
    type: Required[str]  # "text" | "image_url"
    text: str
    image_url: ChatImageURL
    cache_control: CacheControl


class ChatFunction(TypedDict):
    name: str
    arguments: str


class ChatCustom(TypedDict):
    name: str
    input: str


class ChatToolCall(TypedDict, total=False):
    id: Required[str]
    type: Required[str]  # "function" | "custom"
    function: ChatFunction
    custom: ChatCustom


ChatContent: TypeAlias = str | list[ChatContentPart]


class ChatMessage(TypedDict, total=False):
    role: Required[str]
    content: ChatContent | None
    name: str
    reasoning_content: str
    tool_calls: list[ChatToolCall]
    tool_call_id: str


# -- canonical → wire ---------------------------------------------------------------------------


def to_openai_chat(messages: Sequence[Message]) -> list[ChatMessage]:
    """Canonical messages as a Chat Completions ``messages`` array."""
    return [_message_to_wire(m) for m in messages]


def _whole(msg: Message) -> Opaque | None:
    """The message kept whole, when it is one."""
    part = msg.parts[0] if len(msg.parts) == 1 else None
    if isinstance(part, Opaque) and part.item and part.format == PROVIDER_OPENAI_CHAT:
        return part
    return None


def _message_to_wire(msg: Message) -> ChatMessage:
    whole = _whole(msg)
    if whole is not None:
        return cast(ChatMessage, kept(whole))
    result = msg.tool_result
    if result is not None:
        out = ChatMessage(
            role="tool", tool_call_id=result.call_id, content=_result_to_wire(result.content)
        )
        if result.name is not None:
            out["name"] = result.name
        return out
    if msg.role is Role.ASSISTANT:
        out = _assistant_to_wire(msg)
    else:
        out = ChatMessage(role=msg.role.value, content=_content_to_wire(msg.parts, msg.role))
    if msg.name is not None:
        out["name"] = msg.name
    return out


def _assistant_to_wire(msg: Message) -> ChatMessage:
    reasoning: list[str] = []
    content: list[Part] = []
    calls: list[ChatToolCall] = []
    for part in msg.parts:
        if isinstance(part, Reasoning):
            if sends_reasoning(part, PROVIDER_OPENAI_CHAT):
                reasoning.append(part.text)
        elif isinstance(part, ToolCall):
            calls.append(_call_to_wire(part))
        else:
            content.append(part)
    out = ChatMessage(role="assistant", content=None)
    if content:
        out["content"] = _content_to_wire(content, Role.ASSISTANT)
    if reasoning:
        out["reasoning_content"] = "\n\n".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


def _call_to_wire(call: ToolCall) -> ChatToolCall:
    if call.call_type == "custom":
        return ChatToolCall(
            id=call.id, type="custom", custom=ChatCustom(name=call.name, input=call.arguments)
        )
    if call.call_type != "function":
        unsupported(FORMAT, f"tool calls of type {call.call_type!r}", "use a function tool")
    return ChatToolCall(
        id=call.id,
        type="function",
        function=ChatFunction(name=call.name, arguments=call.arguments),
    )


def _content_to_wire(parts: Sequence[Part], role: Role) -> ChatContent:
    flat = [plain(p, PROVIDER_OPENAI_CHAT) for p in parts]
    if len(flat) == 1 and isinstance(flat[0], Text) and flat[0].cache is None:
        return flat[0].text
    return [_part_to_wire(p, role) for p in flat]


def _part_to_wire(part: Part, role: Role) -> ChatContentPart:
    if isinstance(part, Opaque):
        if part.format == PROVIDER_OPENAI_CHAT and not part.item:
            return cast(ChatContentPart, kept(part))
        return ChatContentPart(type="text", text=render_opaque(part))
    if isinstance(part, Text):
        out = ChatContentPart(type="text", text=part.text)
        if part.cache is not None:
            out["cache_control"] = cache_to_wire(part.cache)
        return out
    if isinstance(part, Media) and role is not Role.ASSISTANT:
        return _media_to_wire(part)
    unsupported(
        FORMAT,
        f"{part.kind} parts in {role.value} messages",
        "move the part to a message role that can carry it",
    )


def _media_to_wire(media: Media) -> ChatContentPart:
    image = ChatImageURL(url=media_to_url(media))
    if media.detail is not None:
        image["detail"] = media.detail
    return ChatContentPart(type="image_url", image_url=image)


def _result_to_wire(content: str | tuple[ResultBlock, ...]) -> ChatContent:
    if isinstance(content, str):
        return content
    return [_part_to_wire(p, Role.TOOL) for p in content]


# -- wire → canonical ---------------------------------------------------------------------------


def from_openai_chat(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """A Chat Completions ``messages`` array as canonical messages, one for one."""
    return [_message_from_wire(_read.mapping(m, f"[{i}]"), f"[{i}]") for i, m in enumerate(items)]


def _message_from_wire(item: Mapping[str, Any], where: str) -> Message:
    role = _read.string(item, "role", where)
    if role == "function":
        return Message(Role.USER, (keep(item, PROVIDER_OPENAI_CHAT, item=True),))
    if role == "assistant" and item.get("function_call") is not None:
        return Message(Role.ASSISTANT, (keep(item, PROVIDER_OPENAI_CHAT, item=True),))
    name = _read.opt_string(item, "name", where)
    if role == "tool":
        call_id = _read.string(item, "tool_call_id", where)
        content = item.get("content")
        result: str | tuple[ResultBlock, ...]
        result = content if isinstance(content, str) else _parts_from_wire(content, where)
        return Message(Role.TOOL, (ToolResult(call_id, result, name=name),))
    if role == "assistant":
        return Message(Role.ASSISTANT, _assistant_from_wire(item, where), name)
    if role not in ("system", "developer", "user"):
        _read.fail(f"{where}.role", f"unknown role {role!r}")
    content = item.get("content")
    parts = (Text(content),) if isinstance(content, str) else _parts_from_wire(content, where)
    return Message(Role(role), parts, name)


def _assistant_from_wire(item: Mapping[str, Any], where: str) -> tuple[Part, ...]:
    parts: list[Part] = []
    reasoning = _read.opt_string(item, "reasoning_content", where)
    if reasoning is not None:
        parts.append(Reasoning(reasoning, provider=PROVIDER_OPENAI_CHAT))
    content = item.get("content")
    if isinstance(content, str):
        parts.append(Text(content))
    elif content is not None:
        parts.extend(_parts_from_wire(content, where))
    calls = item.get("tool_calls")
    if calls is not None:
        for j, call in enumerate(_read.array(calls, f"{where}.tool_calls")):
            parts.append(_call_from_wire(call, f"{where}.tool_calls[{j}]"))
    return tuple(parts)


def _call_from_wire(value: object, where: str) -> ToolCall:
    call = _read.mapping(value, where)
    call_id = _read.string(call, "id", where)
    kind = call.get("type", "function")
    if kind == "custom":
        custom = _read.mapping(call.get("custom"), f"{where}.custom")
        name = _read.string(custom, "name", f"{where}.custom")
        return ToolCall(call_id, name, _read.string(custom, "input", f"{where}.custom"), "custom")
    if kind != "function":
        _read.fail(f"{where}.type", f"unsupported tool call type {kind!r}")
    function = _read.mapping(call.get("function"), f"{where}.function")
    name = _read.string(function, "name", f"{where}.function")
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    if not isinstance(arguments, str):
        _read.fail(f"{where}.function.arguments", "expected JSON text")
    return ToolCall(call_id, name, arguments)


def _parts_from_wire(value: object, where: str) -> tuple[ResultBlock, ...]:
    parts: list[ResultBlock] = []
    for j, raw in enumerate(_read.array(value, f"{where}.content")):
        at = f"{where}.content[{j}]"
        part = _read.mapping(raw, at)
        kind = part.get("type")
        if kind == "text":
            parts.append(Text(_read.string(part, "text", at), _read.cache(part, at)))
        elif kind == "image_url":
            image = part.get("image_url")
            if isinstance(image, str):  # the early API allowed a bare URL here
                parts.append(media_from_url(image, None))
                continue
            image = _read.mapping(image, f"{at}.image_url")
            url = _read.string(image, "url", f"{at}.image_url")
            parts.append(media_from_url(url, _read.opt_string(image, "detail", f"{at}.image_url")))
        elif isinstance(kind, str):
            parts.append(keep(part, PROVIDER_OPENAI_CHAT))
        else:
            _read.fail(f"{at}.type", "a content part needs a string type")
    return tuple(parts)
