"""What a page is told as a session runs (SRF-1): ``web_live`` events in the ledger.

The worker that runs a session writes what the TUI would show — the model's text as it
streams, calls, judgments, approvals, outputs, notes, how the run stopped — as ``web_live``
events of the session (:class:`LiveEvents`), so any process serving the ledger streams them to
a page (:func:`live_stream`), as ``comal events`` lists them: a page connected to another
worker of ``comal serve --workers N``, or to another ``comal serve`` on the same PostgreSQL
ledger, sees the run as one connected to the worker running it. An event's id is its record's,
so a page that reconnects anywhere follows on from the last one it saw.

The model's text, and a running call's output (``output_delta``: its call, its stream, its
text; the house hands on at most 200,000 characters a call), are written in pieces of at most a
quarter of a second (or 4,000 characters), not one record per streamed token or read. Beside
the worker's events the stream reports what changed in the ledger itself (``work``,
``compaction``, ``child_*``, ``ledger``), read the same way by every process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import anyio
from starlette.requests import Request

from ..errors import ComalError
from ..ledger import LedgerBackend, Record, Scope
from ._web_views import changes, fingerprint

__all__ = ["LIVE_EVENT", "LiveEvents", "live_stream"]

log = logging.getLogger("comal.serve")

LIVE_EVENT = "web_live"
_DELTA_S = 0.25
_DELTA_CHARS = 4_000
_POLL_S = 0.1
_BATCH = 500


# Events whose text comes in pieces: held back and written together.
_STREAMED = frozenset({"delta", "output_delta"})


class LiveEvents:
    """Writes one session's events to the ledger; callable from any thread of the worker."""

    def __init__(self, ledger: LedgerBackend, scope: Scope) -> None:
        self.ledger = ledger
        self.scope = scope
        self._lock = threading.Lock()
        self._text: list[str] = []
        # The streamed event the held text belongs to: its kind and its other fields.
        self._held: tuple[str, dict[str, Any]] | None = None
        self._since = 0.0

    def emit(self, kind: str, **data: Any) -> None:
        with self._lock:
            if kind in _STREAMED:
                text = str(data.pop("text", ""))
                if self._held != (kind, data):
                    self._flush()  # another stream's text: what was held goes first
                    self._held = (kind, data)
                if not self._text:
                    self._since = time.monotonic()
                self._text.append(text)
                if sum(map(len, self._text)) < _DELTA_CHARS and not self._due():
                    return
                self._flush()
                return
            self._flush()  # the text streamed before this event comes before it
            self._write(kind, data)

    def flush(self, *, due_only: bool = False) -> None:
        """Write the streamed text held back (``due_only``: only once it waited its time)."""
        with self._lock:
            if not due_only or self._due():
                self._flush()

    def _due(self) -> bool:
        return bool(self._text) and time.monotonic() - self._since >= _DELTA_S

    def _flush(self) -> None:
        if self._text and self._held is not None:
            text, self._text = "".join(self._text), []
            kind, data = self._held
            self._write(kind, data | {"text": text})

    def _write(self, kind: str, data: dict[str, Any]) -> None:
        # A page that misses an event reads the transcript; the run must not stop for it.
        try:
            self.ledger.add_record(self.scope, "event", LIVE_EVENT, {"v": 1, "kind": kind} | data)
        except ComalError:
            log.exception("web session %s: a live event was not written", self.scope.session)


def _after(ledger: LedgerBackend, scope: Scope, cursor: int) -> list[Record]:
    return ledger.records(scope, "event", kinds=(LIVE_EVENT,), since_id=cursor, limit=_BATCH)


def _shown(record_id: int, body: dict[str, Any]) -> dict[str, str]:
    data = {k: v for k, v in body.items() if k != "v"} | {"id": record_id}
    return {"event": str(body.get("kind")), "id": str(record_id), "data": json.dumps(data)}


async def live_stream(
    request: Request,
    ledger: LedgerBackend,
    scope: Scope,
    after: int | None,
    working: Callable[[], bool],
) -> AsyncIterator[dict[str, str]]:
    """The session's events after record ``after`` (none: from now on), then the ledger's
    changes, as they come, until the client leaves. ``working()`` says whether some process
    runs the session now (its lock), for the ``hello`` event."""

    def run(fn: Callable[[], Any]) -> Any:
        return anyio.to_thread.run_sync(fn)

    newest = int(await run(lambda: ledger.record_mark(scope, "event")))
    cursor = newest if after is None else after
    hello = {"working": bool(await run(working)), "last": newest}
    yield {"event": "hello", "data": json.dumps(hello)}
    last: dict[str, Any] | None = None
    ticks = 0
    while True:
        found = await run(partial(_after, ledger, scope, cursor))
        for record in found:
            cursor = record.id
            yield _shown(record.id, record.body)
        if ticks % 4 == 0:
            now = await run(lambda: fingerprint(ledger, scope))
            for change in changes(last, now):
                yield {"event": change["kind"], "data": json.dumps(change)}
            last = now
        ticks += 1
        if await request.is_disconnected():
            return
        if len(found) < _BATCH:
            await asyncio.sleep(_POLL_S)
