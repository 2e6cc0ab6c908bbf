"""Server-sent events, folded and written: the base of each protocol's stream parts.

An :class:`Accumulator` folds a protocol's events, one at a time, into the whole reply they
make; only a stream that reached its terminal event (Anthropic ``message_stop``, Chat
``[DONE]``, Responses ``response.completed`` / ``.incomplete``) is :attr:`~Accumulator.done`.

A :class:`Splicer` makes one client stream out of several upstream replies: the proxy offers
its recall tools upstream, and when the model calls one the proxy runs it and asks again, while
the client's stream goes on. Each upstream event becomes what the client gets:

- Text, thinking and other content go through at once, under client-side numbers: Anthropic
  content block indices, Responses ``output_index`` and ``sequence_number`` count across the
  whole client stream; the message (Anthropic ``message_start``, Responses
  ``response.created``, the Chat chunk ``id``) is the first upstream reply's.
- From the first tool call of a round on (a recall call or the client's own: which one comes
  next is not known yet), everything is held. When the round's reply ends with a recall call
  the held events are dropped (that round is recorded as a recall step the client never sees);
  otherwise they are flushed in order.
- The terminal events are sent once, after the last round. Their usage is the *sum over every
  upstream call of the turn* (what the client is billed for); Anthropic's ``message_start``
  carries the first round's numbers, as it is sent before any other round exists.

The client's view of the message is rebuilt from the events it was sent, with the protocol's
accumulator: :meth:`Splicer.shown`. Everything here is pure event folding: no I/O.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from .._parts import Message
from ._reply import Reply

__all__ = ["Accumulator", "Splicer", "load", "pieces", "sse"]


def load(data: str) -> Any:
    """An event's JSON data, or ``None`` when it is not JSON."""
    try:
        return json.loads(data)
    except ValueError:
        return None


def sse(event: str | None, data: object) -> bytes:
    """One server-sent event; ``event=None`` writes a bare ``data:`` line (OpenAI Chat)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def pieces(text: str, size: int | None) -> list[str]:
    """``text`` cut into ``size``-character pieces (``None``: one piece), as streams send it."""
    if size is None:
        return [text] if text else []
    return [text[i : i + size] for i in range(0, len(text), size)]


class Accumulator(ABC):
    """Folds events into a whole reply; :attr:`done` once the terminal event came."""

    def __init__(self) -> None:
        self.done = False
        self.error: dict[str, Any] | None = None
        self.events = 0

    @abstractmethod
    def feed(self, event: str, data: str) -> None:
        """Take one event (each subclass counts it in ``events``)."""

    @abstractmethod
    def reply(self) -> Reply:
        """The whole reply the events so far make."""

    def partial(self) -> dict[str, Any]:
        """What arrived before the stream broke, for the interrupted-response event."""
        return {"events": self.events}


def _sum(into: dict[str, Any], usage: Any) -> None:
    """Add ``usage``'s integers into ``into`` (nested detail objects too)."""
    if not isinstance(usage, dict):
        return
    for key, value in usage.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            into[key] = int(into.get(key) or 0) + value
        elif isinstance(value, dict):
            inner = into.get(key)
            if not isinstance(inner, dict):
                inner = {}
                into[key] = inner
            _sum(inner, value)


class Splicer(ABC):
    """Upstream events of successive rounds in, client bytes out (see the module docstring).
    ``client`` is the protocol's accumulator, fed with what the client is sent."""

    def __init__(self, client: Accumulator) -> None:
        self.client = client
        self.rounds = 0
        self.offered: frozenset[str] = frozenset()
        self.holding = False
        self.held: list[tuple[str, dict[str, Any]]] = []
        self.usage: dict[str, Any] = {}
        self.round_usage: dict[str, Any] = {}

    def start(self, offered: frozenset[str]) -> None:
        """A new upstream reply begins; ``offered``: the recall tools its request offered."""
        self.rounds += 1
        self.offered = offered
        self.holding = False
        self.held = []
        self.round_usage = {}
        self._start()

    def _start(self) -> None:  # noqa: B027 - an optional hook: most protocols keep no round state
        """A protocol's own reset when a round begins."""

    def end(self) -> None:
        """The round's reply ended (its usage counts toward the sum)."""
        _sum(self.usage, self.round_usage)

    def drop(self) -> None:
        """The round ended in a recall: what was held is not the client's."""
        self.held = []

    @abstractmethod
    def feed(self, event: str | None, data: str) -> bytes:
        """One upstream event in; the bytes the client gets now (held events give none)."""

    @abstractmethod
    def finish(self) -> bytes:
        """The held events of the last round and the terminal events."""

    def shown(self) -> Message | None:
        """The message the client was sent (``None``: it could not be read)."""
        try:
            reply = self.client.reply()
        except Exception:  # the client's copy is the proxy's own output: never fatal here
            return None
        return reply.message

    def _emit(self, kind: str | None, value: dict[str, Any] | str) -> bytes:
        data = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        self.client.feed(kind or "", data)
        if kind is None:
            return f"data: {data}\n\n".encode()
        return f"event: {kind}\ndata: {data}\n\n".encode()
