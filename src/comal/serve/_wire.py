"""The client's request and the upstream's reply, in each of the three wire formats.

A request is read into :class:`ClientRequest`: the conversation as *items* — one wire message
(Anthropic, Chat Completions), or one Responses input item or run of adjacent assistant-side
items (reasoning, output message, calls) — each with the canonical messages it stands for and
its JSON exactly as sent. Everything else in the body (``system``, ``tools``, ``metadata``,
``thinking``, ``context_management`` ...) is left alone: :func:`upstream_body` replaces only
the conversation, the output limit and, for recall, the tool list.

Canonical messages are stored without cache hints: clients move their ``cache_control``
breakpoints every turn (Claude Code marks the newest tool result), so the same message is sent
with and without one; the hint belongs to the request, which keeps it, not to the message.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson

from ..errors import InputError
from ..messages import (
    Message,
    Opaque,
    Part,
    Role,
    Text,
    ToolCall,
    ToolResult,
    canonical_json,
    message_to_dict,
    sha256_hex,
)
from ..messages.wire import (
    from_anthropic,
    from_anthropic_message,
    from_openai_chat,
    from_openai_responses,
    is_assistant_item,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)
from ._body import ITEM_DEPTH, load_body, too_deep, too_deep_error
from ._errors import JSONTooDeep

__all__ = [
    "PROTOCOLS",
    "ClientRequest",
    "Item",
    "Piece",
    "Protocol",
    "Reply",
    "message_key",
    "parse_reply",
    "parse_request",
    "render_messages",
    "strip_cache",
    "tool_names",
    "upstream_body",
]

Protocol = Literal["anthropic", "openai_chat", "openai_responses"]
PROTOCOLS: tuple[Protocol, ...] = ("anthropic", "openai_chat", "openai_responses")

_MAX_KEYS: dict[Protocol, tuple[str, ...]] = {
    "anthropic": ("max_tokens",),
    "openai_chat": ("max_completion_tokens", "max_tokens"),
    "openai_responses": ("max_output_tokens",),
}
_CONVERSATION: dict[Protocol, str] = {
    "anthropic": "messages",
    "openai_chat": "messages",
    "openai_responses": "input",
}


def _uncached(part: Opaque) -> Opaque:
    if '"cache_control"' not in part.raw:
        return part
    value = json.loads(part.raw)
    if not isinstance(value, dict) or "cache_control" not in value:
        return part
    del value["cache_control"]
    return replace(part, raw=json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _bare(part: Part) -> Part:
    if isinstance(part, (Text, ToolCall)) and part.cache is not None:
        return replace(part, cache=None)
    if isinstance(part, Opaque):
        return _uncached(part)
    if isinstance(part, ToolResult):
        content = part.content
        if not isinstance(content, str):
            content = tuple(
                replace(p, cache=None)
                if isinstance(p, Text)
                else _uncached(p)
                if isinstance(p, Opaque)
                else p
                for p in content
            )
        return replace(part, content=content, cache=None)
    return part


def strip_cache(message: Message) -> Message:
    """``message`` without prompt-cache hints (see the module docstring)."""
    return Message(message.role, tuple(_bare(p) for p in message.parts), message.name)


def _holds_opaque(part: Part) -> bool:
    if isinstance(part, ToolResult) and not isinstance(part.content, str):
        return any(isinstance(p, Opaque) for p in part.content)
    return isinstance(part, Opaque)


def _sorted_opaque(value: Any) -> Any:
    # A client may send a block back with its keys in another order than the upstream wrote
    # them (an SDK's model of it): the same block either way.
    if isinstance(value, dict):
        if value.get("kind") == "opaque" and isinstance(value.get("raw"), str):
            return value | {"raw": canonical_json(json.loads(value["raw"]))}
        return {k: _sorted_opaque(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sorted_opaque(v) for v in value]
    return value


def message_key(message: Message) -> str:
    """What two sightings of one message share: the digest of its canonical JSON (opaque
    blocks compared by their JSON value, whatever their key order)."""
    data = message_to_dict(message)
    if any(_holds_opaque(p) for p in message.parts):
        data = _sorted_opaque(data)
    return sha256_hex(canonical_json(data))


@dataclass(frozen=True, slots=True)
class Item:
    """One unit of the client's conversation: its wire JSON values, canonical messages and
    their :func:`message_key` digests."""

    raw: tuple[Any, ...]
    messages: tuple[Message, ...]
    keys: tuple[str, ...] = ()


_Parsed = tuple[tuple[Message, ...], tuple[str, ...]]


class ItemCache:
    """What reading an item gave, by the item's exact JSON (protocol and the bytes orjson
    writes for its values, keys in the order sent): its canonical messages and their keys.

    Every request resends the whole history, so all but its last items were read before:
    found here, they are neither read into messages nor digested again (the cost grew with the
    history, on every request). The same bytes always read the same, so the cache holds no
    state of any session: a worker that never saw an item reads it, as before. Bounded by the
    JSON it holds, the oldest first out. A lookup takes no lock (one dict read); storing does.
    Entries are kept per tenant: how fast a request is read must not tell one tenant what
    another sent."""

    def __init__(self, most_bytes: int = 64 << 20) -> None:
        self._most = most_bytes
        self._held = 0
        self._found: dict[bytes, _Parsed] = {}
        self._lock = threading.Lock()

    def get(
        self,
        protocol: Protocol,
        raw: tuple[Any, ...],
        read: Callable[[tuple[Any, ...]], Sequence[Message]],
        tenant: str = "",
    ) -> Item:
        try:
            text: bytes | None = orjson.dumps([tenant, protocol, raw])
        except (orjson.JSONEncodeError, TypeError):
            text = None  # what orjson cannot write (a lone surrogate) is read every time
        if text is not None:
            found = self._found.get(text)
            if found is not None:
                return Item(raw, *found)
        # Found, it was walked when it was first read (the same JSON nests as deep).
        if any(too_deep(value, ITEM_DEPTH) for value in raw):
            raise too_deep_error()
        messages = tuple(strip_cache(m) for m in read(raw))
        parsed = (messages, tuple(message_key(m) for m in messages))
        if text is not None:
            with self._lock:
                if text not in self._found:
                    self._found[text] = parsed
                    self._held += len(text)
                while self._held > self._most and self._found:
                    old = next(iter(self._found))
                    del self._found[old]
                    self._held -= len(old)
        return Item(raw, *parsed)


ITEMS = ItemCache()


@dataclass(frozen=True)
class ClientRequest:
    protocol: Protocol
    raw: bytes
    body: dict[str, Any]
    items: tuple[Item, ...]
    instructions: tuple[Message, ...]  # top-level system / instructions, priced, not stored
    model: str
    stream: bool
    max_key: str | None
    max_tokens: int | None
    tools: tuple[Any, ...] = field(default=())

    @property
    def messages(self) -> list[Message]:
        return [m for item in self.items for m in item.messages]

    @property
    def keys(self) -> list[str]:
        """Each message's :func:`message_key`, in order."""
        return [k for item in self.items for k in item.keys]

    @property
    def tools_json(self) -> str:
        return canonical_json(list(self.tools)) if self.tools else ""


def _read_anthropic(raw: tuple[Any, ...]) -> Sequence[Message]:
    # Claude Code sends system messages inside the conversation (?beta=true).
    return from_anthropic({"messages": list(raw)}, inline_system=True)


def _read_chat(raw: tuple[Any, ...]) -> Sequence[Message]:
    return from_openai_chat(list(raw))


def _read_responses(raw: tuple[Any, ...]) -> Sequence[Message]:
    return from_openai_responses(list(raw))


def _anthropic_items(conversation: Sequence[Any], tenant: str) -> list[Item]:
    items = []
    for i, raw in enumerate(conversation):
        where = f"messages[{i}]"
        if not isinstance(raw, Mapping):
            if too_deep(raw, ITEM_DEPTH):
                raise too_deep_error()
            raise InputError("expected an object", field=where)
        try:
            items.append(ITEMS.get("anthropic", (raw,), _read_anthropic, tenant))
        except JSONTooDeep:
            raise
        except InputError as exc:
            raise InputError(exc.reason, field=f"{where} ({exc.field})") from exc
    return items


def _chat_items(conversation: Sequence[Any], tenant: str) -> list[Item]:
    items = []
    for i, raw in enumerate(conversation):
        try:
            items.append(ITEMS.get("openai_chat", (raw,), _read_chat, tenant))
        except JSONTooDeep:
            raise
        except InputError as exc:
            raise InputError(exc.reason, field=f"messages[{i}] ({exc.field})") from exc
    return items


def _responses_items(conversation: Sequence[Any], tenant: str) -> list[Item]:
    # Adjacent assistant-side items are one canonical assistant message, as the upstream's
    # output is: they must stay one item for the next request to find the recorded reply.
    groups: list[list[Any]] = []
    for raw in conversation:
        if groups and is_assistant_item(raw) and is_assistant_item(groups[-1][-1]):
            groups[-1].append(raw)
        else:
            groups.append([raw])
    items = []
    start = 0
    for group in groups:
        try:
            items.append(ITEMS.get("openai_responses", tuple(group), _read_responses, tenant))
        except JSONTooDeep:
            raise
        except InputError as exc:
            raise InputError(exc.reason, field=f"input[{start}..] ({exc.field})") from exc
        start += len(group)
    return items


def parse_request(protocol: Protocol, raw: bytes, tenant: str = "") -> ClientRequest:
    """Read a client's request body; bad JSON or a bad conversation is an :class:`InputError`.
    ``tenant``: whose request it is (the items already read are found among that tenant's)."""
    key = _CONVERSATION[protocol]
    body = load_body(raw, key)
    if not isinstance(body, dict):
        raise InputError("the request body is not a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("model: a string is required", field="model")
    conversation = body.get(key)
    if protocol == "openai_responses" and isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    if not isinstance(conversation, list):
        raise InputError(f"{key}: an array is required", field=key)
    instructions: list[Message] = []
    # What no typed part carries is kept opaque, so only what the provider refuses too (an
    # unknown role, a block without a type) fails here, as a 400 before anything is stored.
    if protocol == "anthropic":
        items = _anthropic_items(conversation, tenant)
        if body.get("system") is not None:
            system = from_anthropic({"system": body["system"], "messages": []})
            instructions = [strip_cache(m) for m in system]
    elif protocol == "openai_chat":
        items = _chat_items(conversation, tenant)
    else:
        items = _responses_items(conversation, tenant)
        if isinstance(body.get("instructions"), str) and body["instructions"]:
            instructions = [Message.system(body["instructions"])]
    max_key = next((k for k in _MAX_KEYS[protocol] if k in body), None)
    max_tokens = body.get(max_key) if max_key is not None else None
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise InputError(f"{max_key}: an integer is required", field=max_key)
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise InputError("tools: an array is required", field="tools")
    return ClientRequest(
        protocol,
        raw,
        body,
        tuple(items),
        tuple(instructions),
        model,
        bool(body.get("stream")),
        max_key,
        max_tokens,
        tuple(tools),
    )


def tool_names(protocol: Protocol, tools: Sequence[Any]) -> set[str]:
    names = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        name = tool.get("name")
        if protocol == "openai_chat" and isinstance(tool.get("function"), Mapping):
            name = tool["function"].get("name")
        if isinstance(name, str):
            names.add(name)
    return names


# -- what goes upstream -------------------------------------------------------------------------

# A piece of the upstream conversation: a client item sent exactly as it came, or canonical
# messages (the engine's checkpoint, references, bounded messages) rendered for the format.
Piece = tuple[Literal["wire"], Item] | tuple[Literal["canonical"], tuple[Message, ...]]


def render_messages(protocol: Protocol, messages: Sequence[Message]) -> list[Any]:
    """Canonical messages as wire conversation values (system entries inline where allowed)."""
    if protocol == "openai_chat":
        return list(to_openai_chat(messages))
    if protocol == "openai_responses":
        return list(to_openai_responses(messages))
    return list(to_anthropic(messages, inline_system=True)["messages"])


def _merge_anthropic(values: list[tuple[Any, bool]]) -> list[Any]:
    """Adjacent user (or assistant) messages joined into one where one of them is comal's (a
    checkpoint followed by the client's next user message must not make two user turns in a
    row); the client's own adjacent messages stay as it sent them."""
    out: list[Any] = []
    previous_ours = False
    for value, ours in values:
        prev = out[-1] if out else None
        if (
            (ours or previous_ours)
            and isinstance(prev, dict)
            and isinstance(value, Mapping)
            and prev.get("role") == value.get("role")
            and value.get("role") in ("user", "assistant")
        ):

            def blocks(content: Any) -> list[Any]:
                if isinstance(content, str):
                    return [{"type": "text", "text": content}]
                return list(content)

            out[-1] = {
                **prev,
                "content": blocks(prev.get("content")) + blocks(value.get("content")),
            }
        else:
            out.append(value)
        previous_ours = ours
    return out


def upstream_body(
    request: ClientRequest,
    pieces: Sequence[Piece],
    *,
    max_tokens: int | None,
    extra_tools: Sequence[Any] = (),
) -> dict[str, Any]:
    """The client's body with the conversation, output limit and tools replaced."""
    tagged: list[tuple[Any, bool]] = []
    for piece in pieces:
        if piece[0] == "wire":
            tagged.extend((value, False) for value in piece[1].raw)
        else:
            tagged.extend((value, True) for value in render_messages(request.protocol, piece[1]))
    if request.protocol == "anthropic":
        conversation = _merge_anthropic(tagged)
    else:
        conversation = [value for value, _ in tagged]
    body = dict(request.body)
    body[_CONVERSATION[request.protocol]] = conversation
    if max_tokens is not None and request.max_key is not None:
        body[request.max_key] = max_tokens
    if extra_tools:
        body["tools"] = [*request.tools, *extra_tools]
    return body


# -- what comes back ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete upstream reply: the assistant message, its raw usage and stop reason."""

    message: Message | None
    usage: dict[str, Any] | None
    stop: str | None
    response_id: str | None
    model: str | None


def parse_reply(protocol: Protocol, body: Mapping[str, Any]) -> Reply:
    """A whole (non-streamed, or reassembled) upstream response."""
    usage = body.get("usage")
    usage = dict(usage) if isinstance(usage, Mapping) else None
    rid = body.get("id") if isinstance(body.get("id"), str) else None
    model = body.get("model") if isinstance(body.get("model"), str) else None
    if protocol == "anthropic":
        message = from_anthropic_message({"content": body.get("content") or []})
        return Reply(strip_cache(message), usage, body.get("stop_reason"), rid, model)
    if protocol == "openai_chat":
        choices = body.get("choices") or []
        if not choices:
            return Reply(None, usage, None, rid, model)
        choice = choices[0]
        raw = dict(choice.get("message") or {})
        raw.setdefault("role", "assistant")
        message = from_openai_chat([raw])[0]
        return Reply(strip_cache(message), usage, choice.get("finish_reason"), rid, model)
    output = body.get("output") or []
    messages = from_openai_responses(output)
    assistant = next((m for m in messages if m.role is Role.ASSISTANT), None)
    status = body.get("status")
    return Reply(
        None if assistant is None else strip_cache(assistant),
        usage,
        status if isinstance(status, str) else None,
        rid,
        model,
    )
