"""Which ledger session a proxied request belongs to, and what in it is new.

A client names its conversation in one of three ways, strongest first: an ``x-comal-session``
header; its own session id (Claude Code's ``metadata.user_id`` JSON or ``session_<uuid>`` form,
Codex's ``prompt_cache_key`` / ``session-id`` header); or, failing both, the digest of the
request's stable prefix (instructions, tool schemas, first user message).

One client session can hold several conversations (a main loop, sub-agents, side queries), and
each request resends its whole history. So a key names a *family* of ledger sessions, and a
request goes to the member whose client-visible history (its *projection*: every entry except
the proxy's own recall steps) is the longest prefix of the request. When the projection is all
of that prefix the request continues it and only the rest is appended; when the request
diverges inside it (an edited or rewound history) a child session is started (LED-3 parent
link) holding the request's history, and the parent is never touched; when nothing is shared
the request starts a new session of the family.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ledger import Entry, LedgerBackend, Scope, UsageInput
from ..messages import Message, Role, canonical_json, group_messages, sha256_hex
from ._wire import ClientRequest, message_key

__all__ = ["RECALL_EVENT", "Routed", "SessionRouter", "client_key"]

RECALL_EVENT = "proxy_recall"  # entries the proxy added itself (recall steps), not the client's
_UUID = re.compile(r"session_([0-9a-fA-F-]{36})")
_NAMESPACE = uuid.UUID("6c1c63f0-5d7e-4c1e-9a55-3a1d0c6e6f21")


def _claude_session(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if not isinstance(user_id, str):
        return None
    try:
        parsed = json.loads(user_id)
    except ValueError:
        parsed = None
    if isinstance(parsed, Mapping) and isinstance(parsed.get("session_id"), str):
        return str(parsed["session_id"])
    match = _UUID.search(user_id)
    return match[1] if match else None


def client_key(request: ClientRequest, headers: Mapping[str, str]) -> tuple[str, str]:
    """``(key, source)``: the conversation's name and where it came from."""
    explicit = headers.get("x-comal-session")
    if explicit:
        return f"header:{explicit}", "header"
    body = request.body
    if request.protocol == "anthropic":
        found = _claude_session(body) or headers.get("x-claude-code-session-id")
        if found:
            return f"client:{found}", "client"
    else:
        cache_key = body.get("prompt_cache_key")
        if isinstance(cache_key, str) and cache_key:
            return f"client:{cache_key}", "client"
        found = headers.get("session-id") or headers.get("conversation_id")
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


@dataclass
class _Known:
    """A ledger session's projection: client-visible message keys and their entry ids."""

    scope: Scope
    keys: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    last_step: int | None = None
    open_calls: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Routed:
    """Where a request went: its session, each request message's entry id, what was added."""

    scope: Scope
    entry_ids: tuple[int, ...]
    appended: int
    created: bool
    branched_from: str | None
    stitched: frozenset[int] = frozenset()


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class SessionRouter:
    """Routes requests to sessions and appends what is new (one lock: steps stay ordered)."""

    def __init__(self, ledger: LedgerBackend) -> None:
        self.ledger = ledger
        self._lock = threading.RLock()
        self._families: dict[tuple[str, str], list[Scope]] = {}
        self._known: dict[str, _Known] = {}

    def hold(self) -> threading.RLock:
        """The router's lock, for writers that must take it before the ledger's (one order
        everywhere: router, then ledger)."""
        return self._lock

    # -- reading what the ledger already has ------------------------------------------------
    def _family(self, tenant: str, key: str) -> list[Scope]:
        found = self._families.get((tenant, key))
        if found is None:
            found = [
                s.scope
                for s in self.ledger.sessions(tenant=tenant)
                if s.meta.get("client_key") == key
            ]
            self._families[(tenant, key)] = found
        return found

    def known(self, scope: Scope) -> _Known:
        with self._lock:
            known = self._known.get(scope.session)
            if known is None:
                known = self._load(scope)
                self._known[scope.session] = known
            return known

    def _load(self, scope: Scope) -> _Known:
        internal: set[int] = set()
        for record in self.ledger.records(scope, "event", kinds=(RECALL_EVENT,)):
            internal.update(int(i) for i in record.body.get("entries", []))
        known = _Known(scope)
        for entry in self.ledger.iter_entries(scope):
            self._note(known, entry, internal=entry.id in internal)
        return known

    @staticmethod
    def _note(known: _Known, entry: Entry, *, internal: bool = False) -> None:
        message = entry.message
        if entry.step != known.last_step:
            known.last_step = entry.step
            known.open_calls = set()
        known.open_calls.update(c.id for c in message.tool_calls)
        if message.tool_result is not None:
            known.open_calls.discard(message.tool_result.call_id)
        if not internal:
            known.keys.append(message_key(message))
            known.ids.append(entry.id)

    # -- routing ----------------------------------------------------------------------------
    def route(
        self, tenant: str, agent: str, key: str, messages: Sequence[Message], meta: dict[str, Any]
    ) -> Routed:
        keys = [message_key(m) for m in messages]
        with self._lock:
            family = self._family(tenant, key)
            best: _Known | None = None
            best_len = 0
            for member in family:
                known = self.known(member)
                n = _common(known.keys, keys)
                if n > best_len or (n == best_len and best is not None and n > 0):
                    best, best_len = known, n
            if best is not None and best_len == len(best.keys) and best_len > 0:
                added = self._append(best, messages[best_len:])
                return Routed(best.scope, tuple(best.ids[: len(keys)]), added, False, None)
            parent = best.scope.session if best is not None and best_len > 0 else None
            session_id = (
                str(uuid.uuid5(_NAMESPACE, f"{tenant}\x00{key}"))
                if not family
                else str(uuid.uuid4())
            )
            info = {**meta, "client_key": key}
            if parent is not None:
                info |= {"branch_of": parent, "fork_at": best_len}
            scope = self.ledger.create_session(
                tenant, agent, session_id=session_id, parent=parent, source="proxy", meta=info
            )
            family.append(scope)
            known = _Known(scope)
            self._known[scope.session] = known
            added = self._append(known, messages)
            return Routed(scope, tuple(known.ids), added, True, parent)

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
        try:
            with self.ledger.atomic():
                if joining:
                    step = known.last_step
                    for entry in self.ledger.append(known.scope, joining, join_step=step):
                        self._note(known, entry)
                for group in group_messages(rest):
                    for entry in self.ledger.append(known.scope, list(group.messages)):
                        self._note(known, entry)
        except BaseException:
            # The transaction rolled back: the cached projection must not keep what it noted.
            self._known.pop(known.scope.session, None)
            raise
        return len(messages)

    def record_reply(
        self, scope: Scope, message: Message, usage: UsageInput, *, internal: bool = False
    ) -> Entry:
        """The upstream's reply as a new step, with its measured usage (TOK-1)."""
        with self._lock:
            known = self.known(scope)
            entry = self.ledger.append(scope, [message], usage=usage)[0]
            self._note(known, entry, internal=internal)
            return entry

    def record_results(self, scope: Scope, entries: Sequence[Entry]) -> None:
        """Note results another writer (the house) joined to the open step."""
        with self._lock:
            known = self.known(scope)
            for entry in entries:
                self._note(known, entry, internal=True)

    def forget(self, scope: Scope) -> None:
        """Drop the cached projection (after a failed write: re-read it from the ledger)."""
        with self._lock:
            self._known.pop(scope.session, None)
