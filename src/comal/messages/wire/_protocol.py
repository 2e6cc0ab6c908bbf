"""A wire protocol as one value, and the registry every surface looks protocols up in.

A :class:`WireProtocol` holds everything comal knows of one provider API: its name and routes,
how a request's conversation is grouped into items and read into canonical messages (and
canonical messages written back), how a whole reply is read and a stop word normalized, how a
stream is folded (and spliced across recall), how a reply is written back whole or streamed,
its error shapes, where an upstream key goes, and its model list. ``comal serve``'s proxy, the
SDK providers' stop words, ``comal export``, :class:`~comal.testing.FakeServer` and the proxy's
replay all look a protocol up here and call its parts; none of them names a protocol.

The three built-in protocols (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses)
are registered by the built-in plugin ``comal-wire`` through the ``comal_wire_protocols`` hook,
as a plugin registers its own: a new protocol is one module and its registration. The registry
is read from the plugin seam on first use; a name or route two plugins register is refused when
the second one is enabled (``PLUGIN_CONFLICT``, naming it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import UserError
from .._parts import Message
from ._events import Accumulator, Splicer
from ._reply import Reply, Stop, WireReply

__all__ = [
    "UnknownProtocol",
    "WireProtocol",
    "protocol_for_headers",
    "protocol_for_path",
    "protocol_for_route",
    "wire_protocol",
    "wire_protocols",
]


class UnknownProtocol(UserError, ValueError):
    """A protocol name no enabled plugin registers (a ``ValueError`` too, as it always was)."""

    code = "UNKNOWN_PROTOCOL"


def _no_instructions(body: Mapping[str, Any]) -> Sequence[Message]:
    return ()


def _accepts(body: Mapping[str, Any]) -> str | None:
    return None


@dataclass(frozen=True, eq=False)
class WireProtocol:
    """One provider API (see the module docstring). The parts, by concern:

    **Who.** ``name`` is the registry key, the ``protocol`` a request record keeps and the tag of
    the reasoning and opaque parts its converters write; ``title`` names it in messages;
    ``routes`` are the client paths it is served on (``/v1/messages``).

    **The request.** ``conversation`` is the body key holding the conversation (``messages``,
    ``input``); ``group`` splits it into items, each a tuple of wire values that stand for whole
    canonical messages (``None``: one item per value; it returns ``None`` for a value that is
    not a conversation); ``read`` reads one item into canonical messages (raising
    :class:`~comal.errors.InputError`); ``render`` writes canonical messages as conversation
    values; ``merge`` joins adjacent values where the API wants one message per role
    (Anthropic), given each value and whether comal wrote it. ``instructions`` reads the
    top-level system prompt into messages; ``system_key`` is the body key recorded as the
    session's instructions; ``max_keys`` the output limit keys, first found first used;
    ``tool`` turns an Anthropic-shaped tool schema (``name``, ``description``,
    ``input_schema``) into this protocol's; ``client_session`` finds the client's own name for
    the conversation in the body and headers; ``client`` labels its clients.

    **The reply.** ``reply`` reads a whole response into a :class:`Reply`; ``stop`` normalizes a
    stop word (and a detail, Responses' ``incomplete_details.reason``) into a :data:`Stop`;
    ``usage`` names the shape of its usage objects for :func:`comal.tokens.normalize_usage`.
    ``accumulator`` folds a stream into the reply; ``ends`` are bytes its terminal event holds;
    ``splicer`` streams one client reply across several upstream ones (``None``: recall is not
    offered on its streamed turns).

    **Writing a reply** (the proxy's replay of a stored reply, FakeServer). ``content`` writes a
    canonical message as a response's content; ``usage_of`` normalized counts (``new_input``,
    ``cache_read``, ``cache_write``, ``output``, ``reasoning``) as its usage object;
    ``response`` a :class:`WireReply` as the whole response body; ``events`` a whole response as
    its stream (strings cut in ``chunk``-character pieces, ``None``: whole; the usage chunk
    where the client asks for one).

    **Errors.** ``error`` is the body of an error with an HTTP status; ``stream_error`` the
    event that ends a broken stream; ``failures`` the provider's own replies to the named
    failures a script injects (``context_length``, ``rate_limit``, ``server``, ``overloaded``,
    ``bad_request``, ``auth``; ``context_length/<flavor>`` for a compatible server's);
    ``refuses`` says why the API would refuse a body outright (``None``: it would not).

    **Upstream.** ``upstream`` is the configured upstream it goes to (``anthropic``,
    ``openai``); ``auth`` the header an upstream key goes in and the text before the key;
    ``request_id`` the response header holding the provider's request id. ``model`` and
    ``models`` write one model and the list ``GET /v1/models`` answers (``None``: none);
    ``marks`` are request headers only its clients send (the list's protocol is the one whose
    mark a request carries, else the ``fallback`` one, which also shapes errors on paths no
    route has).

    **Export.** ``export`` writes a session for ``comal export --format <export_name>`` (the
    flag: the session was recorded by the proxy, its system messages inside the conversation).
    """

    name: str
    title: str
    routes: tuple[str, ...]
    conversation: str
    read: Callable[[tuple[Any, ...]], Sequence[Message]]
    render: Callable[[Sequence[Message]], list[Any]]
    reply: Callable[[Mapping[str, Any]], Reply]
    stop: Callable[[str | None, str | None], Stop]
    usage: str
    accumulator: Callable[[], Accumulator]
    ends: tuple[bytes, ...]
    content: Callable[[Message], Any]
    usage_of: Callable[[Mapping[str, int | None]], dict[str, Any]]
    response: Callable[[WireReply], dict[str, Any]]
    events: Callable[[Mapping[str, Any], int | None, bool], Iterator[bytes]]
    error: Callable[[int, str], dict[str, Any]]
    stream_error: Callable[[str], bytes]
    upstream: str
    auth: tuple[str, str]
    request_id: str
    client: str
    group: Callable[[object], list[tuple[Any, ...]] | None] | None = None
    merge: Callable[[list[tuple[Any, bool]]], list[Any]] | None = None
    instructions: Callable[[Mapping[str, Any]], Sequence[Message]] = _no_instructions
    system_key: str | None = None
    max_keys: tuple[str, ...] = ()
    tool: Callable[[Mapping[str, Any]], dict[str, Any]] = dict
    client_session: Callable[[Mapping[str, Any], Mapping[str, str]], str | None] | None = None
    splicer: Callable[[], Splicer] | None = None
    failures: Mapping[str, tuple[int, Mapping[str, Any]]] = field(default_factory=dict)
    refuses: Callable[[Mapping[str, Any]], str | None] = _accepts
    model: Callable[[str, str, int], dict[str, Any]] | None = None
    models: Callable[[list[dict[str, Any]]], dict[str, Any]] | None = None
    marks: tuple[str, ...] = ()
    fallback: bool = False
    export: Callable[[Sequence[Message], bool], Any] | None = None
    export_name: str | None = None

    def __repr__(self) -> str:
        return f"WireProtocol({self.name!r})"


# -- the registry -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Index:
    """The registered protocols by name and by route, for one state of the plugins."""

    source: Mapping[str, WireProtocol]
    routes: Mapping[str, WireProtocol]
    fallback: WireProtocol | None


_index: _Index | None = None


def _current() -> _Index:
    global _index
    from ... import plugins

    found: Mapping[str, WireProtocol] = plugins.wire_protocols()
    index = _index
    if index is None or index.source is not found:
        routes = {route: p for p in found.values() for route in p.routes}
        fallback = next((p for p in found.values() if p.fallback), None)
        index = _index = _Index(found, routes, fallback)
    return index


def wire_protocols() -> Mapping[str, WireProtocol]:
    """Every registered protocol by name, read-only (the built-ins first, then plugins')."""
    return _current().source


def wire_protocol(name: str) -> WireProtocol:
    """The protocol called ``name``, or :class:`UnknownProtocol` listing the registered ones."""
    found = _current().source.get(name)
    if found is None:
        names = ", ".join(_current().source)
        raise UnknownProtocol(
            f"unknown protocol {name!r}; use one of {names}, or enable the plugin that registers it"
        )
    return found


def protocol_for_route(path: str) -> WireProtocol | None:
    """The protocol served on ``path`` (a route exactly, no query), or ``None``."""
    return _current().routes.get(path)


def protocol_for_path(path: str) -> WireProtocol | None:
    """The protocol whose error shape the clients of ``path`` read: its route, or a path
    under one (``/v1/messages/count_tokens``); another ``/v1/`` path gets the fallback
    protocol's; ``None`` outside ``/v1/`` (comal's own API)."""
    index = _current()
    exact = index.routes.get(path)
    if exact is not None:
        return exact
    for route, protocol in index.routes.items():
        if path.startswith(route + "/"):
            return protocol
    return index.fallback if path.startswith("/v1/") else None


def protocol_for_headers(headers: Mapping[str, str]) -> WireProtocol | None:
    """The protocol of a request that has no route of its own (``GET /v1/models``): the one
    whose mark (a header only its clients send) the request carries, else the fallback."""
    index = _current()
    for protocol in index.source.values():
        if any(mark in headers for mark in protocol.marks):
            return protocol
    return index.fallback
