"""The client's request, in the wire protocol of its route, and what goes upstream for it.

A request is read into :class:`ClientRequest`: the conversation as *items*, as the protocol
groups it (:attr:`~comal.messages.wire.WireProtocol.group`: one wire message of Anthropic or
Chat Completions, one Responses input item or run of adjacent assistant-side items), each with
the canonical messages it stands for and its JSON exactly as sent. Everything else in the body
(``system``, ``tools``, ``metadata``, ``thinking``, ``context_management`` ...) is left alone:
:func:`upstream_body` replaces only the conversation, the output limit and, for recall, the
tool list.

Canonical messages are stored without cache hints (:func:`~comal.messages.wire.strip_cache`):
the hint belongs to the request, which keeps it, not to the message.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ..errors import InputError
from ..messages import (
    Message,
    Opaque,
    Part,
    ToolResult,
    canonical_json,
    message_to_dict,
    sha256_hex,
)
from ..messages.wire import WireProtocol, strip_cache
from ._body import ITEM_DEPTH, load_body, too_deep, too_deep_error
from ._errors import JSONTooDeep

__all__ = [
    "ClientRequest",
    "Item",
    "Piece",
    "message_key",
    "parse_request",
    "upstream_body",
]


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
        protocol: str,
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
    protocol: WireProtocol
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


def _items(protocol: WireProtocol, conversation: object, tenant: str) -> list[Item] | None:
    """The conversation's items as the protocol groups them (``None``: not a conversation);
    an item that does not read is an :class:`InputError` naming where it starts."""
    grouped = protocol.group
    if grouped is None:
        if not isinstance(conversation, list):
            return None
        groups: Sequence[tuple[Any, ...]] = [(raw,) for raw in conversation]
    else:
        found = grouped(conversation)
        if found is None:
            return None
        groups = found
    items = []
    start = 0
    for group in groups:
        try:
            items.append(ITEMS.get(protocol.name, group, protocol.read, tenant))
        except JSONTooDeep:
            raise
        except InputError as exc:
            # A grouping protocol's item may span several values: it starts at ``start``.
            where = f"{protocol.conversation}[{start}{'..' if grouped else ''}]"
            field = f"{where} ({exc.field})" if exc.field else where
            raise InputError(exc.reason, field=field) from exc
        start += len(group)
    return items


def parse_request(protocol: WireProtocol, raw: bytes, tenant: str = "") -> ClientRequest:
    """Read a client's request body; bad JSON or a bad conversation is an :class:`InputError`.
    ``tenant``: whose request it is (the items already read are found among that tenant's)."""
    key = protocol.conversation
    body = load_body(raw, key)
    if not isinstance(body, dict):
        raise InputError("the request body is not a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("model: a string is required", field="model")
    # What no typed part carries is kept opaque, so only what the provider refuses too (an
    # unknown role, a block without a type) fails here, as a 400 before anything is stored.
    items = _items(protocol, body.get(key), tenant)
    if items is None:
        raise InputError(f"{key}: an array is required", field=key)
    instructions = tuple(strip_cache(m) for m in protocol.instructions(body))
    max_key = next((k for k in protocol.max_keys if k in body), None)
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
        instructions,
        model,
        bool(body.get("stream")),
        max_key,
        max_tokens,
        tuple(tools),
    )


# -- what goes upstream -------------------------------------------------------------------------

# A piece of the upstream conversation: a client item sent exactly as it came, or canonical
# messages (the engine's checkpoint, references, bounded messages) rendered for the protocol.
Piece = tuple[Literal["wire"], Item] | tuple[Literal["canonical"], tuple[Message, ...]]


def upstream_body(
    request: ClientRequest,
    pieces: Sequence[Piece],
    *,
    max_tokens: int | None,
    extra_tools: Sequence[Any] = (),
) -> dict[str, Any]:
    """The client's body with the conversation, output limit and tools replaced."""
    protocol = request.protocol
    tagged: list[tuple[Any, bool]] = []
    for piece in pieces:
        if piece[0] == "wire":
            tagged.extend((value, False) for value in piece[1].raw)
        else:
            tagged.extend((value, True) for value in protocol.render(piece[1]))
    if protocol.merge is not None:
        conversation = protocol.merge(tagged)
    else:
        conversation = [value for value, _ in tagged]
    body = dict(request.body)
    body[protocol.conversation] = conversation
    if max_tokens is not None and request.max_key is not None:
        body[request.max_key] = max_tokens
    if extra_tools:
        body["tools"] = [*request.tools, *extra_tools]
    return body
