"""Recording what the proxy saw: replies as steps, requests with their usage, interruptions,
recall steps, and the instructions of each session. Everything here runs in a worker thread
(the ledger is synchronous).

A recall call runs before its step is recorded, on a ledger connection of its own
(:class:`RecallLedgers`) and outside the router's lock: the ledger's one connection and the
router's lock serve every tenant, and a search, however long its time bound lets it run, must
hold neither while another tenant's request waits. Only the step (the reply, the results, the
receipts) is then written, in one short transaction under the router's lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ComalError, InputError
from ..ledger import LedgerBackend, Scope, UsageInput
from ..messages import Message, canonical_json, sha256_hex
from ..messages.wire import Accumulator, Reply, WireProtocol
from ..ops import Actor, House, HouseFactory, Outcome
from ..tokens import Usage, normalize_usage
from ._sessions import RECALL_EVENT, REPLAY_EVENT, REQUEST_DIGEST, Answered, Routed, SessionRouter
from ._turn import Turn
from ._wire import ClientRequest

__all__ = [
    "INSTRUCTIONS_EVENT",
    "INTERRUPTED_EVENT",
    "Call",
    "Exchange",
    "RecallLedgers",
    "Recorder",
    "read_reply",
]

INSTRUCTIONS_EVENT = "proxy_instructions"
INTERRUPTED_EVENT = "interrupted_response"
_UNKNOWN = Usage(None, None, None, None, None)


@dataclass
class Exchange:
    status: int
    headers: dict[str, str]
    body: bytes
    reply: Reply | None
    latency_ms: float
    media_type: str = "application/json"
    unparsed: str | None = None  # why a successful reply could not be read into a message


def read_reply(make: Callable[[], Reply]) -> tuple[Reply | None, str | None]:
    """A reply comal cannot read (an output item it does not know) still goes to the client;
    the request record says why no entry was appended."""
    try:
        return make(), None
    except (ComalError, ValueError, KeyError, TypeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


@dataclass
class Call:
    """One request in progress: where it was routed and what it carries."""

    protocol: WireProtocol
    request: ClientRequest
    routed: Routed
    url: str
    headers: dict[str, str]
    tenant: str
    client_tools: set[str] = field(default_factory=set)
    digest: str = ""  # sha256 of the request's bytes: a retry sends the same (see _sessions)
    reply_entry: int | None = None  # the reply the client gets (stored, or given again)

    @property
    def scope(self) -> Scope:
        return self.routed.scope


def _reopen(ledger: LedgerBackend) -> LedgerBackend | None:
    """A second connection to ``ledger`` (None where there is no second one: an in-memory
    ledger is private to its connection)."""
    from ..ledger import PostgresLedger, SQLiteLedger, open_ledger

    if isinstance(ledger, SQLiteLedger) and ledger.path != ":memory:":
        return open_ledger(Path(ledger.path), create=False, counter=ledger.counter)
    if isinstance(ledger, PostgresLedger):
        return PostgresLedger(
            ledger.url, schema=ledger.schema, create=False, counter=ledger.counter
        )
    return None


class RecallLedgers:
    """Ledger connections for recall calls, opened as needed (at most ``most`` at once; a
    recall beyond waits for one) and kept for the next; the ledger itself where no second
    connection can be opened."""

    def __init__(self, ledger: LedgerBackend, most: int = 4) -> None:
        self._ledger = ledger
        self._most = most
        self._free: list[LedgerBackend] = []
        self._open = 0
        self._closed = False
        self._turn = threading.Condition()

    @contextmanager
    def lease(self) -> Iterator[LedgerBackend]:
        with self._turn:
            while not self._free and self._open >= self._most:
                self._turn.wait()
            found = self._free.pop() if self._free else None
            if found is None:
                self._open += 1
        try:
            led = found if found is not None else _reopen(self._ledger)
        except BaseException:
            self._give_back(None)
            raise
        if led is None:
            self._give_back(None)
            yield self._ledger
            return
        try:
            yield led
        finally:
            self._give_back(led)

    def _give_back(self, led: LedgerBackend | None) -> None:
        with self._turn:
            if led is None or self._closed:
                self._open -= 1
                if led is not None:
                    led.close()
            else:
                self._free.append(led)
            self._turn.notify()

    def close(self) -> None:
        with self._turn:
            self._closed = True
            for led in self._free:
                led.close()
            self._open -= len(self._free)
            self._free.clear()


class Recorder:
    """The proxy's writes to the ledger."""

    def __init__(self, ledger: LedgerBackend, router: SessionRouter, houses: HouseFactory) -> None:
        self.ledger = ledger
        self.router = router
        self.houses = houses
        self.recall_ledgers = RecallLedgers(ledger)
        self._instructions: dict[str, tuple[int | None, str]] = {}

    def note_instructions(self, call: Call) -> None:
        """Record the request's system prompt and tools when they change (lossless). The cached
        latest event is checked against the ledger (another process may share it): only events
        newer than the one cached are read."""
        key = call.protocol.system_key
        system = call.request.body.get(key) if key is not None else None
        value = {"system": system, "tools": list(call.request.tools)}
        digest = sha256_hex(canonical_json(value))
        if self._latest(call.scope) == digest:
            return
        with self.ledger.atomic():
            self.ledger.exclusive(f"instructions\x00{call.scope.session}")
            if self._latest(call.scope) == digest:
                return
            record = self.ledger.add_record(
                call.scope, "event", INSTRUCTIONS_EVENT, {"v": 1, "digest": digest, **value}
            )
            self._instructions[call.scope.session] = (record.id, digest)

    def _latest(self, scope: Scope) -> str:
        since, digest = self._instructions.get(scope.session, (None, ""))
        newer = self.ledger.records(scope, "event", kinds=(INSTRUCTIONS_EVENT,), since_id=since)
        if newer:
            digest = str(newer[-1].body.get("digest"))
            self._instructions[scope.session] = (newer[-1].id, digest)
        return digest

    def usage(
        self, call: Call, reply: Reply | None, turn: Turn, meta: dict[str, Any]
    ) -> UsageInput:
        usage = _UNKNOWN
        if reply is not None and reply.usage is not None:
            try:
                usage = normalize_usage(call.protocol.usage, reply.usage)
            except InputError:
                meta = {**meta, "usage_raw": reply.usage}
        model = (reply.model if reply is not None else None) or call.request.model
        route = call.protocol.name
        own = {"v": 1, "route": route, "stream": call.request.stream, **meta}
        own[REQUEST_DIGEST] = call.digest
        if reply is not None:
            own |= {"stop": reply.stop, "response_id": reply.response_id}
        return turn.prepared.usage(usage, model=model, protocol=route, fields=own)

    def request_record(
        self,
        call: Call,
        turn: Turn,
        entry_id: int | None,
        reply: Reply | None,
        meta: dict[str, Any],
    ) -> None:
        turn.prepared.record_usage(self.usage(call, reply, turn, meta), entry_id=entry_id)

    def record(
        self,
        call: Call,
        turn: Turn,
        exchange: Exchange,
        meta: dict[str, Any] | None = None,
        shown: Message | None = None,
    ) -> None:
        """The reply as a step; ``shown``: the message the client got when it differs (a
        stream continued after recall)."""
        reply = exchange.reply
        extra = {"latency_ms": exchange.latency_ms, **(meta or {})}
        if reply is None or reply.message is None or not reply.message.parts:
            extra |= {"empty": True, "unparsed": exchange.unparsed}
            self.request_record(call, turn, None, reply, extra)
            return
        usage = self.usage(call, reply, turn, extra)
        entry = self.router.record_reply(call.scope, reply.message, usage, shown=shown)
        call.reply_entry = entry.id

    def replayed(self, call: Call, answer: Answered) -> None:
        """A retried request was given the reply already stored (no upstream call)."""
        body = {"v": 1, "entry": answer.entry, REQUEST_DIGEST: call.digest}
        body |= {"route": call.protocol.name, "stream": call.request.stream}
        self.ledger.add_record(call.scope, "event", REPLAY_EVENT, body)

    def interrupted(self, call: Call, turn: Turn, acc: Accumulator, why: str) -> None:
        route = call.protocol.name
        body = {"v": 1, "reason": why, "route": route, **acc.partial()}
        with self.ledger.atomic():
            self.ledger.add_record(call.scope, "event", INTERRUPTED_EVENT, body)
            own = {"v": 1, "route": route, "stream": call.request.stream}
            turn.prepared.record(
                _UNKNOWN,
                model=call.request.model,
                protocol=route,
                fields=own | {REQUEST_DIGEST: call.digest, "interrupted": why},
            )

    def recall(self, call: Call, turn: Turn, exchange: Exchange) -> None:
        """Run the reply's calls of offered recall tools through the house, then record them
        as a step of their own; the other calls beside them get an error result (they were not
        run)."""
        reply = exchange.reply
        assert reply is not None and reply.message is not None
        message = reply.message
        usage = self.usage(call, reply, turn, {"recall": True, "latency_ms": exchange.latency_ms})
        actor = Actor.user(f"proxy:{call.tenant}")
        # Read-only calls, judged and run now; their step does not exist yet, so a search does
        # not find the call that asked for it.
        with self.recall_ledgers.lease() as reader:
            runner = self.houses.but(ledger=reader).house(call.scope)
            catalog = runner.catalog("model")
            outcomes = {
                c.id: runner.run(c, actor, offered=catalog)
                for c in message.tool_calls
                if c.name in turn.offered
            }
        house = self.houses.house(call.scope)
        with self.router.hold():
            try:
                self._recall_step(call, message, usage, house, outcomes)
            except BaseException:
                # The step rolled back: the cached projection must not keep what it noted.
                self.router.forget(call.scope)
                raise

    def _recall_step(
        self,
        call: Call,
        message: Message,
        usage: UsageInput,
        house: House,
        outcomes: dict[str, Outcome],
    ) -> None:
        with self.ledger.atomic():
            entry = self.router.record_reply(call.scope, message, usage, internal=True)
            for c in message.tool_calls:
                if c.id in outcomes:
                    house.record(outcomes[c.id], join_step=entry.step)
                else:
                    text = (
                        f"[comal: {c.name} was not run: this reply also called a recall tool, so "
                        "the model was asked again with what it read; propose the call again]"
                    )
                    self.ledger.append(
                        call.scope, [Message.tool(c.id, text, is_error=True)], join_step=entry.step
                    )
            added = self.ledger.entries(call.scope, start_seq=entry.seq + 1)
            self.router.record_results(call.scope, added)
            ids = [entry.id, *(e.id for e in added)]
            self.ledger.add_record(call.scope, "event", RECALL_EVENT, {"v": 1, "entries": ids})
