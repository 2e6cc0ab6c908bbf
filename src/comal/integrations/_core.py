"""The core every framework adapter shares: one ledger session that a framework's agent drives.

A framework keeps its own message list and calls its own model; comal sits at three points of
its loop, through the public API only:

- **record**: what the agent says and does is appended to the ledger as it happens — the
  framework's messages converted to canonical :class:`~comal.messages.Message` values, tool
  results joining the step of the call they answer, each model reply as a step with the request
  record of the assembly that produced it (OBS-1). A message is recorded once: the framework's
  own id (LangChain's message id) is kept in a ``framework_keys`` event, and a tool result whose
  call is already answered is not appended again, so a history handed back in (a checkpointer, a
  second run given the first run's messages) adds nothing twice.
- **assemble**: before each model call the turn service (:class:`comal.turns.ContextSession`)
  budgets, assembles, commits and maintains the session under the model's window, exactly as the
  agent and the proxy do; the adapter sends its messages instead of the framework's list.
- **recall**: the engine's recall tools (its ``model_tools``: EvidenceRead, the dag's ``ctx_*``,
  the pipeline's ``session_search``, ``memory_search``) are offered as framework tools; a call
  runs through the house (judged, receipted) and returns the exact text.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from ..context import get_engine
from ..errors import UserError
from ..ledger import Entry, LedgerBackend, Scope, UsageInput
from ..messages import Message, Role, canonical_json, group_messages
from ..ops import Actor, HouseFactory, Policy, Registry, default_registry
from ..tokens import Usage, count_messages
from ..turns import ContextSession, configure

__all__ = [
    "KEYS_EVENT",
    "Assembled",
    "IntegrationInput",
    "IntegrationUnavailable",
    "LedgerSession",
    "RecallTool",
    "require",
]

KEYS_EVENT = "framework_keys"
_UNKNOWN = Usage(None, None, None, None, None)


class IntegrationUnavailable(UserError):
    """The framework an adapter needs is not installed."""

    code = "INTEGRATION_UNAVAILABLE"


class IntegrationInput(UserError):
    """Something the framework handed the adapter that it cannot record or use."""

    code = "INTEGRATION_INPUT"


def require(module: str, extra: str) -> ModuleType:
    """``module`` imported, or :class:`IntegrationUnavailable` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise IntegrationUnavailable(
            f"{module} is not installed; install the extra: pip install 'comal[{extra}]'"
        ) from exc


@dataclass(frozen=True, slots=True)
class RecallTool:
    """One recall operation as a framework tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Assembled:
    """What the model is sent this call (no system message: the framework keeps its own) and
    the request record's fields."""

    messages: tuple[Message, ...]
    meta: dict[str, Any]


class LedgerSession:
    """One ledger session driven by a framework's agent; see the module docstring.

    ``session``: an id to resume (or to create with that id); ``None`` starts a new session.
    ``window``: the model's context window in tokens; ``output_reserve`` what is kept for the
    reply (default: the budget's). ``engine`` and ``settings`` name an engine of the registry and
    its configuration, validated with its ranges.
    """

    def __init__(
        self,
        ledger: LedgerBackend,
        *,
        session: str | None = None,
        tenant: str = "default",
        agent: str = "agent",
        engine: str = "limit",
        settings: Mapping[str, Any] | BaseModel | None = None,
        window: int = 128_000,
        output_reserve: int | None = None,
        framework: str = "framework",
    ) -> None:
        if window < 256:
            raise IntegrationInput(f"window={window} is too small; give the model's window")
        self.ledger = ledger
        self.window = window
        self.output_reserve = output_reserve
        self.framework = framework
        # The engine and its settings are checked before a session exists: a typo creates none.
        found_engine = get_engine(engine)
        config = configure(found_engine, settings, ledger.counter, where="settings")
        self.scope = self._open(session, tenant, agent)
        self.service = ContextSession(ledger, self.scope, found_engine, config)
        registry = default_registry()
        found = [registry.get(name) for name in self.service.engine.model_tools]
        self.registry = Registry([op for op in found if op is not None])
        self.house = HouseFactory(ledger, self.registry, Policy()).house(self.scope)
        self.actor = Actor.user(f"{framework}:{tenant}")
        self._lock = threading.RLock()
        self._keys: set[str] = set()
        self._answered: set[str] = set()
        self._open_calls: set[str] = set()
        self._last_step: int | None = None
        self._meta: dict[str, Any] | None = None
        self._load()

    # -- the session ---------------------------------------------------------------------------
    def _open(self, session: str | None, tenant: str, agent: str) -> Scope:
        source = f"integration:{self.framework}"
        if session is None:
            return self.ledger.create_session(tenant, agent, source=source)
        scope = Scope(tenant, agent, session)
        if self.ledger.session(scope) is not None:
            return scope
        return self.ledger.create_session(tenant, agent, session_id=session, source=source)

    @property
    def session_id(self) -> str:
        return self.scope.session

    def _load(self) -> None:
        # What is recorded already: the framework's keys, the answered calls and the open step.
        for record in self.ledger.records(self.scope, "event", kinds=(KEYS_EVENT,)):
            self._keys.update(str(k) for k in record.body.get("keys", ()))
        for entry in self.ledger.iter_entries(self.scope):
            self._note(entry)

    def _note(self, entry: Entry) -> None:
        message = entry.message
        if message.tool_calls:
            self._last_step = entry.step
            self._open_calls = {c.id for c in message.tool_calls}
        elif entry.step != self._last_step:
            self._open_calls = set()
        result = message.tool_result
        if result is not None:
            self._answered.add(result.call_id)
            self._open_calls.discard(result.call_id)

    def knows(self, key: str) -> bool:
        """Whether the framework's message ``key`` is recorded."""
        return key in self._keys

    def entries(self) -> list[Entry]:
        return self.ledger.entries(self.scope)

    # -- record --------------------------------------------------------------------------------
    def _new(self, items: Sequence[tuple[str | None, Message]]) -> list[tuple[str | None, Message]]:
        # A result is a repeat when its call was answered and no call of that id is open
        # since (a model may reuse an id in a later step).
        out: list[tuple[str | None, Message]] = []
        waiting = set(self._open_calls)
        for key, message in items:
            if key is not None and key in self._keys:
                continue
            result = message.tool_result
            if result is not None:
                if result.call_id in self._answered and result.call_id not in waiting:
                    continue
                waiting.discard(result.call_id)
            elif message.tool_calls:
                waiting = {c.id for c in message.tool_calls}
            out.append((key, message))
        return out

    def record(self, items: Sequence[tuple[str | None, Message]]) -> list[Entry]:
        """Append what is new in ``items`` (key, message) as whole steps: results of the open
        step join it; the rest is grouped into steps as :func:`group_messages` reads them."""
        with self._lock:
            new = self._new(items)
            if not new:
                return []
            rest = [m for _, m in new]
            joining: list[Message] = []
            while rest and (r := rest[0].tool_result) is not None and r.call_id in self._open_calls:
                joining.append(rest.pop(0))
                self._open_calls.discard(r.call_id)
            made: list[Entry] = []
            with self.ledger.atomic():
                if joining:
                    made += self.ledger.append(self.scope, joining, join_step=self._last_step)
                for group in group_messages(rest):
                    made += self.ledger.append(
                        self.scope, list(group.messages), usage=self._reply_usage(group.messages)
                    )
                self._keep([k for k, _ in new if k is not None])
            for entry in made:
                self._note(entry)
            return made

    def _reply_usage(self, messages: Sequence[Message]) -> UsageInput | None:
        # A framework that hands the reply over with the rest of its turn (the Agents SDK, a
        # plain history processor) still gets the request record of the assembly it was sent.
        if self._meta is None or messages[0].role is not Role.ASSISTANT:
            return None
        meta = {"v": 1, "framework": self.framework, **self._meta}
        self._meta = None
        return UsageInput(_UNKNOWN, protocol=self.framework, meta=meta)

    def _keep(self, keys: Sequence[str]) -> None:
        if keys:
            self.ledger.add_record(self.scope, "event", KEYS_EVENT, {"v": 1, "keys": list(keys)})
            self._keys.update(keys)

    def record_reply(
        self, message: Message, *, key: str | None = None, usage: Usage | None = None,
        model: str | None = None,
    ) -> Entry | None:  # fmt: skip
        """The model's reply as a step of its own, with the request record of the assembly that
        was sent for it (OBS-1); ``None`` when ``key`` is recorded already."""
        with self._lock:
            if key is not None and key in self._keys:
                return None
            meta = {"v": 1, "framework": self.framework, **(self._meta or {})}
            made = UsageInput(usage or _UNKNOWN, model=model, protocol=self.framework, meta=meta)
            with self.ledger.atomic():
                entry = self.ledger.append(self.scope, [message], usage=made)[0]
                self._keep([key] if key is not None else [])
            self._meta = None
            self._note(entry)
            return entry

    # -- assemble ------------------------------------------------------------------------------
    def assemble(
        self, *, system: Sequence[Message] = (), tools: Sequence[Mapping[str, Any]] = ()
    ) -> Assembled:
        """The active memory for the next model call, under the window less ``system`` and
        ``tools`` (the framework sends both itself); the engine's maintenance runs first."""
        counter = self.ledger.counter
        with self._lock:
            budget = self.service.budget(
                self.window,
                system_tokens=count_messages(counter, list(system)),
                tools_tokens=counter.count(canonical_json(list(tools))) if tools else 0,
                output_reserve=self.output_reserve,
            )
            self.service.maintain(budget, defer=False)
            view = self.service.view()
            assembly = self.service.assemble(view, budget)
            self.service.commit(assembly, at=view.end_seq, since=self.service.since())
            self._meta = self.service.meta(view, budget, assembly)
            return Assembled(tuple(assembly.messages), dict(self._meta))

    # -- recall --------------------------------------------------------------------------------
    def recall_tools(self) -> list[RecallTool]:
        """The engine's recall tools, as the model is offered them."""
        return [
            RecallTool(f["name"], f["description"], f["parameters"])
            for f in (spec["function"] for spec in self.registry.catalog("model").tools("openai"))
        ]

    def recall(self, name: str, arguments: str, call_id: str) -> tuple[str, bool]:
        """Run a recall call through the house; its text and whether it is an error. The result
        joins its step when the call is recorded and open, else only the receipt is written
        and the result arrives with the framework's messages."""
        from ..messages import ToolCall

        with self._lock:
            call = ToolCall(call_id, name, arguments)
            outcome = self.house.run(call, self.actor, offered=self.registry.catalog("model"))
            joined = call_id in self._open_calls
            self.house.record(
                outcome, join_step=self._last_step if joined else None, append_result=joined
            )
            if joined:
                self._answered.add(call_id)
                self._open_calls.discard(call_id)
            return outcome.result.text, outcome.result.is_error
