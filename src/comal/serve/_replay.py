"""A stored reply given again, in the client's format: what a retried request gets.

A client retries a request it got no answer to (its connection broke, ``comal serve`` was
killed) with the same bytes. When the ledger already holds the reply to that very request
(:meth:`~comal.serve._sessions.SessionRouter.answered`), the proxy does not call upstream again:
a second reply would be a second step the client never asked for, and storing it would put the
conversation in the ledger twice. The stored reply is rendered back instead, whole or as a
stream, from the stored message and its request record (the upstream's id, model, stop reason
and usage): the message the client gets is the one stored, so the conversation it sends next
continues the same session. Only the framing is rebuilt, by the route's protocol
(:attr:`~comal.messages.wire.WireProtocol.response` and ``events``, the writers FakeServer
answers with too); a stream sends each string whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..ledger import RequestRecord
from ..messages import Message
from ..messages.wire import WireProtocol, WireReply

__all__ = ["Stored", "replay_body"]

_COUNTS = ("new_input", "cache_read", "cache_write", "output", "reasoning")


@dataclass(frozen=True, slots=True)
class Stored:
    """A reply as the ledger keeps it: the message the client was given and the request
    record of the call that produced it."""

    message: Message
    record: RequestRecord | None
    model: str

    @property
    def response_id(self) -> str:
        rid = self.record.meta.get("response_id") if self.record is not None else None
        return rid if isinstance(rid, str) else "comal_replay"

    @property
    def stop(self) -> str | None:
        stop = self.record.meta.get("stop") if self.record is not None else None
        return stop if isinstance(stop, str) else None

    def tokens(self, name: str) -> int:
        value = getattr(self.record, name, None) if self.record is not None else None
        return value if isinstance(value, int) else 0

    def reply(self, protocol: WireProtocol) -> WireReply:
        """The stored reply, to write in ``protocol``'s response shape."""
        usage = protocol.usage_of({name: self.tokens(name) for name in _COUNTS})
        content = protocol.content(self.message)
        created = int(time.time())
        return WireReply(self.response_id, self.model, content, self.stop, usage, created)


def replay_body(
    protocol: WireProtocol, stored: Stored, *, stream: bool, include_usage: bool = False
) -> bytes | AsyncIterator[bytes]:
    """The body a client of ``protocol`` gets for ``stored``."""
    whole = protocol.response(stored.reply(protocol))
    if not stream:
        return json.dumps(whole, ensure_ascii=False).encode()
    events = list(protocol.events(whole, None, include_usage))

    async def body() -> AsyncIterator[bytes]:
        for event in events:
            yield event

    return body()
