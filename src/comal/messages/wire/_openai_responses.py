"""OpenAI Responses API input items ↔ canonical messages.

Normal form (round-trips exactly both ways):

- ``message`` items with role ``system`` / ``developer`` / ``user`` ↔ one canonical message each;
  ``content`` is always a list of ``input_text`` / ``input_image`` parts (``image_url`` is a data
  URL or a plain URL, ``detail`` ↔ ``Media.detail``).
- Assistant-side items — ``reasoning``, assistant ``message`` (``output_text`` parts),
  ``function_call``, ``custom_tool_call`` — that follow each other form ONE canonical assistant
  message, parts in item order. Converting back emits one item per reasoning part and tool call,
  and one ``message`` item per run of adjacent text parts. So two adjacent canonical assistant
  messages read back as one, and two adjacent assistant ``message`` items as one.
- ``reasoning`` ↔ :class:`Reasoning` tagged ``"openai_responses"``: ``id``, ``summary`` (one
  string per ``summary_text``), ``encrypted_content`` ↔ ``data``, ``content`` (one
  ``reasoning_text``) ↔ ``text``. ``summary`` is always written; ``id``, ``content`` and
  ``encrypted_content`` only when set.
- ``function_call {call_id, name, arguments}`` ↔ :class:`ToolCall`; ``custom_tool_call {call_id,
  name, input}`` ↔ ``ToolCall(call_type="custom", arguments=input)``.
- ``function_call_output`` / ``custom_tool_call_output {call_id, output}`` ↔ a tool message;
  ``output`` is the exact string, or a list of ``input_text`` / ``input_image`` parts. Which output
  type is written follows the type of the call with that ``call_id`` earlier in the sequence
  (``function_call_output`` for an orphan).

Kept whole (:class:`Opaque`, written back exactly, keys in their order): an item of a type this
module does not read — tool calls of the hosted tools (``web_search_call``,
``local_shell_call``, ``computer_call``… any ``*_call``, and ``mcp_list_tools`` /
``mcp_approval_request``) join the assistant message of the items around them, as the model
made them; every other (``item_reference``, ``*_call_output``…) is the only part of a user
message of its own — and a content part of a type it does not read (``input_file``,
``refusal``…). An opaque part of another format is sent as its placeholder text. A message
item with another role than ``system``, ``developer``, ``user`` or ``assistant`` is an error,
as the API has it.

Not carried (the canonical model has no field; see the module's report): the ``id`` of
``function_call``, ``custom_tool_call``, output and assistant ``message`` items (``fc_…``,
``ctc_…``, ``msg_…``) and every item's ``status``. Also not carried: ``content: null`` on reasoning
(read as no text), cache hints, ``Message.name``, ``ToolResult.is_error`` / ``name``, a
message's string ``content`` (read as one text part, written back as a list), and several
``reasoning_text`` parts (joined with blank lines). Reasoning tagged for another provider is not
sent; engine parts are sent as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Required, TypeAlias, TypedDict, cast

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
    PROVIDER_OPENAI_RESPONSES,
    Reader,
    keep,
    kept,
    media_from_url,
    media_to_url,
    plain,
    sends_reasoning,
    unsupported,
)

FORMAT = "OpenAI Responses"
_read = Reader(FORMAT)


class ResponsesContentPart(TypedDict, total=False):
    type: Required[str]  # "input_text" | "output_text" | "input_image"
    text: str
    image_url: str
    detail: str


ResponsesOutput: TypeAlias = str | list[ResponsesContentPart]


class MessageItem(TypedDict):
    type: Literal["message"]
    role: str
    content: list[ResponsesContentPart]


class SummaryText(TypedDict):
    type: Literal["summary_text"]
    text: str


class ReasoningText(TypedDict):
    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(TypedDict, total=False):
    type: Required[Literal["reasoning"]]
    id: str
    summary: Required[list[SummaryText]]
    content: list[ReasoningText]
    encrypted_content: str


class FunctionCallItem(TypedDict):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class CustomToolCallItem(TypedDict):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str


class OutputItem(TypedDict):
    type: Literal["function_call_output", "custom_tool_call_output"]
    call_id: str
    output: ResponsesOutput


ResponsesItem: TypeAlias = (
    MessageItem | ReasoningItem | FunctionCallItem | CustomToolCallItem | OutputItem
)

_CALL_TYPES = ("function_call", "custom_tool_call")
_KNOWN_ITEMS = frozenset(
    {"message", "reasoning", *_CALL_TYPES, "function_call_output", "custom_tool_call_output"}
)
# Items the model makes besides function calls, by the API's naming (kept opaque).
_MODEL_ITEMS = frozenset({"mcp_list_tools", "mcp_approval_request"})


def is_assistant_item(item: object) -> bool:
    """Whether a Responses input item is the model's (it joins the assistant message of the
    items next to it): reasoning, calls, assistant messages, and unread ``*_call`` items."""
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return item.get("role") == "assistant"
    if kind in ("reasoning", *_CALL_TYPES):
        return True
    return (
        isinstance(kind, str)
        and kind not in _KNOWN_ITEMS
        and (kind.endswith("_call") or kind in _MODEL_ITEMS)
    )


# -- canonical → wire ---------------------------------------------------------------------------


def to_openai_responses(messages: Sequence[Message]) -> list[ResponsesItem]:
    """Canonical messages as Responses API ``input`` items."""
    items: list[ResponsesItem] = []
    call_types: dict[str, str] = {}
    for msg in messages:
        result = msg.tool_result
        if result is not None:
            custom = call_types.get(result.call_id) == "custom"
            kind: Literal["function_call_output", "custom_tool_call_output"] = (
                "custom_tool_call_output" if custom else "function_call_output"
            )
            items.append(
                OutputItem(type=kind, call_id=result.call_id, output=_output(result.content))
            )
        elif msg.role is Role.ASSISTANT:
            call_types.update((c.id, c.call_type) for c in msg.tool_calls)
            items.extend(_assistant_items(msg.parts))
        elif (whole := _whole(msg)) is not None:
            items.append(cast(ResponsesItem, kept(whole)))
        else:
            content = [
                _input_part(plain(p, PROVIDER_OPENAI_RESPONSES), msg.role) for p in msg.parts
            ]
            items.append(MessageItem(type="message", role=msg.role.value, content=content))
    return items


def _whole(msg: Message) -> Opaque | None:
    part = msg.parts[0] if len(msg.parts) == 1 else None
    if isinstance(part, Opaque) and part.item and part.format == PROVIDER_OPENAI_RESPONSES:
        return part
    return None


def _assistant_items(parts: Sequence[Part]) -> list[ResponsesItem]:
    items: list[ResponsesItem] = []
    texts: list[ResponsesContentPart] = []

    def flush() -> None:
        if texts:
            items.append(MessageItem(type="message", role="assistant", content=texts.copy()))
            texts.clear()

    for part in (plain(p, PROVIDER_OPENAI_RESPONSES) for p in parts):
        if isinstance(part, Text):
            texts.append(ResponsesContentPart(type="output_text", text=part.text))
            continue
        if isinstance(part, Opaque) and not part.item:
            texts.append(cast(ResponsesContentPart, kept(part)))
            continue
        flush()
        if isinstance(part, Opaque):
            items.append(cast(ResponsesItem, kept(part)))
            continue
        if isinstance(part, Reasoning):
            if sends_reasoning(part, PROVIDER_OPENAI_RESPONSES):
                items.append(_reasoning_item(part))
        elif isinstance(part, ToolCall):
            items.append(_call_item(part))
        else:
            unsupported(
                FORMAT, f"{part.kind} parts in assistant messages", "send it in a user message"
            )
    flush()
    return items


def _reasoning_item(part: Reasoning) -> ReasoningItem:
    summary = [SummaryText(type="summary_text", text=s) for s in part.summary]
    item = ReasoningItem(type="reasoning", summary=summary)
    if part.id is not None:
        item["id"] = part.id
    if part.text:
        item["content"] = [ReasoningText(type="reasoning_text", text=part.text)]
    if part.data is not None:
        item["encrypted_content"] = part.data
    return item


def _call_item(call: ToolCall) -> FunctionCallItem | CustomToolCallItem:
    if call.call_type == "custom":
        return CustomToolCallItem(
            type="custom_tool_call", call_id=call.id, name=call.name, input=call.arguments
        )
    if call.call_type != "function":
        unsupported(FORMAT, f"tool calls of type {call.call_type!r}", "use a function tool")
    return FunctionCallItem(
        type="function_call", call_id=call.id, name=call.name, arguments=call.arguments
    )


def _input_part(part: Part, role: Role) -> ResponsesContentPart:
    if isinstance(part, Opaque):
        if part.format == PROVIDER_OPENAI_RESPONSES and not part.item:
            return cast(ResponsesContentPart, kept(part))
        return ResponsesContentPart(type="input_text", text=render_opaque(part))
    if isinstance(part, Text):
        return ResponsesContentPart(type="input_text", text=part.text)
    if isinstance(part, Media):
        out = ResponsesContentPart(type="input_image", image_url=media_to_url(part))
        if part.detail is not None:
            out["detail"] = part.detail
        return out
    unsupported(
        FORMAT,
        f"{part.kind} parts in {role.value} messages",
        "move the part to a message role that can carry it",
    )


def _output(content: str | tuple[ResultBlock, ...]) -> ResponsesOutput:
    if isinstance(content, str):
        return content
    return [_input_part(p, Role.TOOL) for p in content]


# -- wire → canonical ---------------------------------------------------------------------------


def from_openai_responses(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Responses API input (or output) items as canonical messages."""
    messages: list[Message] = []
    turn: list[Part] = []  # the assistant message being assembled from adjacent items
    for i, raw in enumerate(items):
        where = f"[{i}]"
        item = _read.mapping(raw, where)
        # A bare ``{role, content}`` is the API's shorthand for a message item.
        kind = item.get("type", "message" if "role" in item else None)
        role = _read.string(item, "role", where) if kind == "message" else None
        if is_assistant_item(item):
            turn.extend(_assistant_parts(item, kind, where))
            continue
        if turn:
            messages.append(Message(Role.ASSISTANT, tuple(turn)))
            turn = []
        messages.append(_other_message(item, kind, role, where))
    if turn:
        messages.append(Message(Role.ASSISTANT, tuple(turn)))
    return messages


def _assistant_parts(item: Mapping[str, Any], kind: object, where: str) -> list[Part]:
    if kind == "reasoning":
        return [_reasoning_from_wire(item, where)]
    if kind == "function_call":
        name = _read.string(item, "name", where)
        arguments = _read.string(item, "arguments", where)
        return [ToolCall(_read.string(item, "call_id", where), name, arguments)]
    if kind == "custom_tool_call":
        name = _read.string(item, "name", where)
        raw_input = _read.string(item, "input", where)
        return [ToolCall(_read.string(item, "call_id", where), name, raw_input, "custom")]
    if kind != "message":
        return [keep(item, PROVIDER_OPENAI_RESPONSES, item=True)]
    return list(_content_from_wire(item.get("content"), where))


def _other_message(item: Mapping[str, Any], kind: object, role: str | None, where: str) -> Message:
    if kind in ("function_call_output", "custom_tool_call_output"):
        call_id = _read.string(item, "call_id", where)
        output = item.get("output")
        content = output if isinstance(output, str) else _content_from_wire(output, where, "output")
        return Message(Role.TOOL, (ToolResult(call_id, content),))
    if not isinstance(kind, str):
        _read.fail(f"{where}.type", "an input item needs a string type (or a role)")
    if kind != "message":
        return Message(Role.USER, (keep(item, PROVIDER_OPENAI_RESPONSES, item=True),))
    if role not in ("system", "developer", "user"):
        _read.fail(f"{where}.role", f"unknown role {role!r}")
    return Message(Role(role), _content_from_wire(item.get("content"), where))


def _reasoning_from_wire(item: Mapping[str, Any], where: str) -> Reasoning:
    summary: list[str] = []
    for j, raw in enumerate(_read.array(item.get("summary", []), f"{where}.summary")):
        at = f"{where}.summary[{j}]"
        summary.append(_read.string(_read.mapping(raw, at), "text", at))
    texts: list[str] = []
    content = item.get("content")
    if content is not None:
        for j, raw in enumerate(_read.array(content, f"{where}.content")):
            at = f"{where}.content[{j}]"
            texts.append(_read.string(_read.mapping(raw, at), "text", at))
    return Reasoning(
        "\n\n".join(texts),
        data=_read.opt_string(item, "encrypted_content", where),
        summary=tuple(summary),
        id=_read.opt_string(item, "id", where),
        provider=PROVIDER_OPENAI_RESPONSES,
    )


def _content_from_wire(value: object, where: str, key: str = "content") -> tuple[ResultBlock, ...]:
    if isinstance(value, str):
        return (Text(value),)
    parts: list[ResultBlock] = []
    for j, raw in enumerate(_read.array(value, f"{where}.{key}")):
        at = f"{where}.{key}[{j}]"
        part = _read.mapping(raw, at)
        kind = part.get("type")
        if kind in ("input_text", "output_text"):
            parts.append(Text(_read.string(part, "text", at)))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            url = part["image_url"]
            parts.append(media_from_url(url, _read.opt_string(part, "detail", at)))
        elif isinstance(kind, str):
            parts.append(keep(part, PROVIDER_OPENAI_RESPONSES))
        else:
            _read.fail(f"{at}.type", "a content part needs a string type")
    return tuple(parts)
