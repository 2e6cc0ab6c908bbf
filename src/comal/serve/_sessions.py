"""Which ledger session a proxied request belongs to, and what in it is new.

A client names its conversation in one of three ways, strongest first: an ``x-comal-session``
header; its own session id, as its protocol finds it
(:attr:`~comal.messages.wire.WireProtocol.client_session`: Claude Code's ``metadata.user_id``
JSON or ``session_<uuid>`` form, Codex's ``prompt_cache_key`` / ``session-id`` header); or,
failing both, the digest of the
request's stable prefix (instructions, tool schemas, first user message).

One client session can hold several conversations (a main loop, sub-agents, side queries), and
each request resends its whole history. So a key names a *family* of ledger sessions, and a
request goes to the member whose client-visible history (its *projection*: every entry except
the proxy's own recall steps) is the longest prefix of the request. When the projection is all
of that prefix the request continues it and only the rest is appended; when the request
diverges inside it (an edited or rewound history) a child session is started (LED-3 parent
link) holding the request's history, and the parent is never touched; when nothing is shared
the request starts a new session of the family.

**Retries.** A client that got no answer (its connection broke, the proxy was killed after the
reply was stored but before it was delivered) sends the same request again, byte for byte.
Its history is then the session's projection but for the one reply stored last, which read as
a rewind would copy the whole history into a child session and store the reply twice. So the
reply's request record keeps the digest of the request's bytes, and a request that is the
projection less its last entry, whose record names that entry and this very digest, is the
same request again: it is routed to the session, nothing is appended, and the stored reply is
given back without calling upstream (:mod:`._replay`), as :data:`REPLAY_EVENT` records. Unless
this process sent that reply whole (:meth:`SessionRouter.delivered`): then the client had it,
and the same bytes again are asked anew (a client sampling one prompt twice), a rewind as
before. A check at the session's turn (:meth:`SessionRouter.answered`) catches a retry that
arrived while the first attempt was still running. A request that differs in any byte
(another model, another option) is a new request.

**Shared ledgers.** Several ``comal serve`` processes may write one ledger. The decision "what
is new since this session's last request" is made inside the write transaction that appends it
(SQLite's ``BEGIN IMMEDIATE`` holds the database's write lock; PostgreSQL takes a
transaction-scoped advisory lock on the family), against the ledger: the per-process cache of
families and projections is only a hint. A family's members have ids derived from its key and
their number (``uuid5``), so a process finds the members another created by looking up the
next id; a cached projection is used only while the session's entry count still equals what it
noted, and is read again from the ledger otherwise.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..ledger import Entry, LedgerBackend, RequestRecord, Scope, UsageInput
from ..messages import (
    Message,
    Role,
    canonical_json,
    first_words,
    group_messages,
    message_from_dict,
    message_to_dict,
    sha256_hex,
)
from ._wire import ClientRequest, message_key

__all__ = [
    "RECALL_EVENT",
    "REPLAY_EVENT",
    "REQUEST_DIGEST",
    "SHOWN_EVENT",
    "Answered",
    "Routed",
    "SessionRouter",
    "client_key",
]

RECALL_EVENT = "proxy_recall"  # entries the proxy added itself (recall steps), not the client's
# A reply the client holds in another shape than stored: a stream continued after recall shows
# the parts of every round as one message; ``key`` is that message's, ``entry`` the last round's,
# ``message`` the message itself (what a retry of the request is given again).
SHOWN_EVENT = "proxy_shown"
# A retried request answered with the reply already stored (``entry``), without an upstream call.
REPLAY_EVENT = "proxy_replayed"
# The request-record meta key holding the sha256 of the client request's bytes.
REQUEST_DIGEST = "request_sha256"
_NAMESPACE = uuid.UUID("6c1c63f0-5d7e-4c1e-9a55-3a1d0c6e6f21")


def client_key(request: ClientRequest, headers: Mapping[str, str]) -> tuple[str, str]:
    """``(key, source)``: the conversation's name and where it came from."""
    explicit = headers.get("x-comal-session")
    if explicit:
        return f"header:{explicit}", "header"
    own = request.protocol.client_session
    found = own(request.body, headers) if own is not None else None
    if found:
        return f"client:{found}", "client"
    first_user = next((m for m in request.messages if m.role is Role.USER), None)
    prefix = canonical_json(
        [
            [message_key(m) for m in request.instructions],
            request.tools_json,
            message_key(first_user) if first_user is not None else None,
        ]
    )
    return f"prefix:{sha256_hex(prefix)[:32]}", "prefix"


def _member_id(tenant: str, key: str, number: int) -> str:
    name = f"{tenant}\x00{key}" if number == 0 else f"{tenant}\x00{key}\x00{number}"
    return str(uuid.uuid5(_NAMESPACE, name))


@dataclass
class _Known:
    """A ledger session's projection: client-visible message keys and their entry ids, and
    ``count``, the entries it has seen (its own recall steps included), to validate it by."""

    scope: Scope
    family: str
    keys: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    last_step: int | None = None
    open_calls: set[str] = field(default_factory=set)
    count: int = 0
    stitched: set[int] = field(default_factory=set)


@dataclass
class _Family:
    members: list[Scope]
    next: int  # the number of the next member id to look for


@dataclass(frozen=True, slots=True)
class Answered:
    """The reply the ledger already holds for a retried request: its entry, the message the
    client was given (see :data:`SHOWN_EVENT`) and the request record of the call that made it."""

    entry: int
    message: Message
    record: RequestRecord


@dataclass(frozen=True, slots=True)
class Routed:
    """Where a request went: its session, each request message's entry id, what was added, the
    entries the client holds in another shape than stored (see :data:`SHOWN_EVENT`), and, for
    a retry, the reply already stored for it."""

    scope: Scope
    entry_ids: tuple[int, ...]
    appended: int
    created: bool
    branched_from: str | None
    stitched: frozenset[int] = frozenset()
    answered: Answered | None = None


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class SessionRouter:
    """Routes requests to sessions and appends what is new (one lock in the process, and the
    ledger's write transaction across processes: steps stay ordered)."""

    def __init__(self, ledger: LedgerBackend) -> None:
        self.ledger = ledger
        self._lock = threading.RLock()
        self._families: dict[tuple[str, str], _Family] = {}
        self._tenants: dict[str, dict[str, list[Scope]]] = {}
        self._known: dict[str, _Known] = {}
        # Per session, the reply entry this process last sent whole to its client.
        self._delivered: dict[str, int] = {}

    def hold(self) -> threading.RLock:
        """The router's lock, for writers that must take it before the ledger's (one order
        everywhere: router, then ledger)."""
        return self._lock

    # -- reading what the ledger already has (inside the write transaction) -----------------
    def _listed(self, tenant: str) -> dict[str, list[Scope]]:
        """The tenant's proxy sessions by client key, as the ledger held them when this
        process first asked: read once, not once per new key (a scan of every session of the
        tenant, under the router's lock). Sessions made since, by any process, have derived
        ids (:func:`_member_id`), which :meth:`_family` looks up one by one."""
        found = self._tenants.get(tenant)
        if found is None:
            found = {}
            for s in self.ledger.sessions(tenant=tenant):
                key = s.meta.get("client_key")
                if isinstance(key, str):
                    found.setdefault(key, []).append(s.scope)
            self._tenants[tenant] = found
        return found

    def _family(self, tenant: str, key: str) -> _Family:
        found = self._families.get((tenant, key))
        if found is None:
            members = list(self._listed(tenant).get(key, ()))
            ids = {m.session for m in members}
            number = 0
            while _member_id(tenant, key, number) in ids:
                number += 1
            found = _Family(members, number)
            self._families[(tenant, key)] = found
        # Members another process created since: the next ids, looked up one by one.
        while True:
            try:
                scope = self.ledger.resolve(_member_id(tenant, key, found.next))
            except UserError:
                return found
            found.next += 1
            if scope.tenant == tenant and scope not in found.members:
                found.members.append(scope)

    def known(self, scope: Scope) -> _Known:
        """The session's projection, read again from the ledger when another writer added to
        it (call inside the write transaction for an answer that holds until it commits)."""
        with self._lock:
            known = self._known.get(scope.session)
            if known is not None:
                info = self.ledger.session(scope)
                if info is not None and info.entries == known.count:
                    return known
            known = self._load(scope)
            self._known[scope.session] = known
            return known

    def _load(self, scope: Scope) -> _Known:
        internal: set[int] = set()
        shown: dict[int, str] = {}
        kinds = (RECALL_EVENT, SHOWN_EVENT)
        for record in self.ledger.records(scope, "event", kinds=kinds):
            if record.kind == RECALL_EVENT:
                internal.update(int(i) for i in record.body.get("entries", []))
            else:
                shown[int(record.body["entry"])] = str(record.body["key"])
        info = self.ledger.session(scope)
        family = str(info.meta.get("client_key", "")) if info is not None else ""
        known = _Known(scope, family)
        for entry in self.ledger.iter_entries(scope):
            self._note(known, entry, internal=entry.id in internal, shown=shown.get(entry.id))
        return known

    @staticmethod
    def _note(
        known: _Known, entry: Entry, *, internal: bool = False, shown: str | None = None
    ) -> None:
        message = entry.message
        known.count += 1
        if entry.step != known.last_step:
            known.last_step = entry.step
            known.open_calls = set()
        known.open_calls.update(c.id for c in message.tool_calls)
        if message.tool_result is not None:
            known.open_calls.discard(message.tool_result.call_id)
        if not internal:
            known.keys.append(shown if shown is not None else message_key(message))
            known.ids.append(entry.id)
            if shown is not None:
                known.stitched.add(entry.id)

    def _drop(self, scopes: Sequence[Scope], family: tuple[str, str] | None = None) -> None:
        # A transaction rolled back: the cache must not keep what it noted inside it.
        for scope in scopes:
            self._known.pop(scope.session, None)
        if family is not None:
            self._families.pop(family, None)
            self._tenants.pop(family[0], None)

    # -- routing ----------------------------------------------------------------------------
    def route(
        self,
        tenant: str,
        agent: str,
        key: str,
        messages: Sequence[Message],
        meta: dict[str, Any],
        digest: str | None = None,
        keys: Sequence[str] | None = None,
    ) -> Routed:
        """Route a request (``digest``: of its bytes, which recognises a retry; ``keys``: each
        message's :func:`message_key`, where the caller has them already)."""
        if keys is None or len(keys) != len(messages):
            keys = [message_key(m) for m in messages]
        with self._lock:
            family = self._families.get((tenant, key))
            touched = list(family.members) if family is not None else []
            try:
                with self.ledger.atomic():
                    self.ledger.exclusive(f"{tenant}\x00{key}")
                    return self._route(tenant, agent, key, messages, keys, meta, digest)
            except BaseException:
                family = self._families.get((tenant, key))
                self._drop([*touched, *(family.members if family else [])], (tenant, key))
                raise

    def _route(
        self,
        tenant: str,
        agent: str,
        key: str,
        messages: Sequence[Message],
        keys: Sequence[str],
        meta: dict[str, Any],
        digest: str | None,
    ) -> Routed:
        family = self._family(tenant, key)
        best: _Known | None = None
        best_len = 0
        for member in family.members:
            known = self.known(member)
            n = _common(known.keys, keys)
            if n > best_len or (n == best_len and best is not None and n > 0):
                best, best_len = known, n
        if best is not None and best_len == len(best.keys) and best_len > 0:
            added = self._append(best, messages[best_len:])
            stitched = frozenset(best.stitched)
            return Routed(best.scope, tuple(best.ids[: len(keys)]), added, False, None, stitched)
        if best is not None and best_len == len(keys) > 0:
            answer = self._answered(best, len(keys), digest, waited=False)
            if answer is not None:  # a retry: the session holds its reply already
                ids, stitched = tuple(best.ids[: len(keys)]), frozenset(best.stitched)
                return Routed(best.scope, ids, 0, False, None, stitched, answer)
        parent = best.scope.session if best is not None and best_len > 0 else None
        session_id = _member_id(tenant, key, family.next)
        info = {**meta, "client_key": key}
        if parent is not None:
            info |= {"branch_of": parent, "fork_at": best_len}
        # Titled by what the client's user asked, so `comal sessions` says more than "proxy".
        scope = self.ledger.create_session(
            tenant,
            agent,
            session_id=session_id,
            parent=parent,
            title=first_words(messages),
            source="proxy",
            meta=info,
        )
        family.next += 1
        family.members.append(scope)
        known = _Known(scope, key)
        self._known[scope.session] = known
        added = self._append(known, messages)
        return Routed(scope, tuple(known.ids), added, True, parent)

    # -- retries ----------------------------------------------------------------------------
    def answered(self, scope: Scope, count: int, digest: str | None) -> Answered | None:
        """For a request routed to ``scope`` as a continuation, once it holds the session's
        turn: the reply an identical attempt stored meanwhile (it came while that attempt ran;
        see the module docstring)."""
        with self._lock:
            return self._answered(self.known(scope), count, digest, waited=True)

    def delivered(self, scope: Scope, entry_id: int) -> None:
        """The reply ``entry_id`` went out whole: the same request again is a new one (no lock:
        called on the event loop, one dict item set)."""
        self._delivered[scope.session] = entry_id

    def _answered(
        self, known: _Known, count: int, digest: str | None, *, waited: bool
    ) -> Answered | None:
        if not digest or count < 1 or len(known.keys) != count + 1:
            return None
        entry_id = known.ids[-1]
        if not waited and self._delivered.get(known.scope.session) == entry_id:
            return None  # the client had it: sent again, the request is asked anew
        record = self.ledger.last_request(known.scope, measured=False)
        if record is None or record.entry_id != entry_id:
            return None
        if record.meta.get(REQUEST_DIGEST) != digest:
            return None
        message: Message | None = None
        if entry_id in known.stitched:
            message = self._shown(known.scope, entry_id)
        else:
            entry = self.ledger.entry(known.scope, entry_id)
            message = entry.message if entry is not None else None
        return None if message is None else Answered(entry_id, message, record)

    def _shown(self, scope: Scope, entry_id: int) -> Message | None:
        """The message the client was given for ``entry_id`` (None where the event that says
        so predates keeping it)."""
        for record in reversed(self.ledger.records(scope, "event", kinds=(SHOWN_EVENT,))):
            if record.body.get("entry") == entry_id:
                shown = record.body.get("message")
                return message_from_dict(shown) if isinstance(shown, dict) else None
        return None

    def _append(self, known: _Known, messages: Sequence[Message]) -> int:
        """Append ``messages`` as whole steps: results of the open step join it (they arrive
        with the request after the one whose reply proposed the calls)."""
        if not messages:
            return 0
        rest = list(messages)
        joining: list[Message] = []
        while rest and rest[0].tool_result is not None:
            call_id = rest[0].tool_result.call_id
            if call_id not in known.open_calls:
                break
            joining.append(rest.pop(0))
            known.open_calls.discard(call_id)
        with self.ledger.atomic():
            if joining:
                step = known.last_step
                for entry in self.ledger.append(known.scope, joining, join_step=step):
                    self._note(known, entry)
            for group in group_messages(rest):
                for entry in self.ledger.append(known.scope, list(group.messages)):
                    self._note(known, entry)
        return len(messages)

    def record_reply(
        self,
        scope: Scope,
        message: Message,
        usage: UsageInput,
        *,
        internal: bool = False,
        shown: Message | None = None,
    ) -> Entry:
        """The upstream's reply as a new step, with its measured usage (TOK-1). ``shown``: the
        message the client got instead, when it differs (see :data:`SHOWN_EVENT`)."""
        with self._lock:
            try:
                with self.ledger.atomic():
                    family = self._family_of(scope)
                    self.ledger.exclusive(f"{scope.tenant}\x00{family}")
                    known = self.known(scope)
                    entry = self.ledger.append(scope, [message], usage=usage)[0]
                    key = None if shown is None else message_key(shown)
                    if shown is not None and key != message_key(message):
                        body: dict[str, Any] = {"v": 1, "entry": entry.id, "key": key}
                        body["message"] = message_to_dict(shown)
                        self.ledger.add_record(scope, "event", SHOWN_EVENT, body)
                    else:
                        key = None
                    self._note(known, entry, internal=internal, shown=key)
                    return entry
            except BaseException:
                self._drop([scope])
                raise

    def _family_of(self, scope: Scope) -> str:
        known = self._known.get(scope.session)
        if known is not None:
            return known.family
        info = self.ledger.session(scope)
        return str(info.meta.get("client_key", "")) if info is not None else ""

    def record_results(self, scope: Scope, entries: Sequence[Entry]) -> None:
        """Note results another writer (the house) joined to the open step."""
        with self._lock:
            known = self._known.get(scope.session)
            if known is None:
                return
            for entry in entries:
                self._note(known, entry, internal=True)

    def forget(self, scope: Scope) -> None:
        """Drop the cached projection (after a failed write: re-read it from the ledger)."""
        with self._lock:
            self._known.pop(scope.session, None)
