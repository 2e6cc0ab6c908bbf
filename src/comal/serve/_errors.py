"""The errors ``comal serve`` answers a client with, each with a stable code and a status.

A :class:`RequestRefused` stops a request before any route runs (its Host, its origin, a key
in its URL, a client too slow to send it); bad conversations are :class:`InputError` leaves
(:class:`JSONTooDeep`, :class:`ToolPairsBroken`). Either reaches the client as an error in the
route's provider shape (proxy routes) or ``{"error": {"code", "message"}}`` (the API).
"""

from __future__ import annotations

from ..errors import InputError, UserError

__all__ = [
    "AddressInUse",
    "CannotListen",
    "HostNotAllowed",
    "JSONTooDeep",
    "KeyInURL",
    "OriginNotAllowed",
    "RequestRefused",
    "RequestTimeout",
    "ToolPairsBroken",
]


class CannotListen(UserError):
    """``comal serve`` cannot listen on the address it was given (no such local address, a
    port the user may not take); said before the server starts, never as uvicorn's log."""

    code = "CANNOT_LISTEN"


class AddressInUse(CannotListen):
    """Another process (often another ``comal serve``) already listens on the port."""

    code = "ADDRESS_IN_USE"


class RequestRefused(UserError):
    """A request refused before any route runs; ``status`` is the HTTP status it gets."""

    code = "REQUEST_REFUSED"
    status = 400


class HostNotAllowed(RequestRefused):
    """The ``Host`` header names a host this server does not answer to (DNS rebinding)."""

    code = "HOST_NOT_ALLOWED"
    status = 400


class OriginNotAllowed(RequestRefused):
    """A browser request from another origin than the server's own or an allowed one."""

    code = "ORIGIN_NOT_ALLOWED"
    status = 403


class KeyInURL(RequestRefused):
    """A comal proxy key in the query string: URLs end up in logs, histories and upstreams."""

    code = "KEY_IN_URL"
    status = 400


class RequestTimeout(RequestRefused):
    """The client did not send the whole request body in time."""

    code = "REQUEST_TIMEOUT"
    status = 408


class JSONTooDeep(InputError):
    """A request body nested deeper than the proxy reads."""

    code = "JSON_TOO_DEEP"


class ToolPairsBroken(InputError):
    """Tool calls and results that do not pair up the way the providers require."""

    code = "TOOL_PAIRS"
