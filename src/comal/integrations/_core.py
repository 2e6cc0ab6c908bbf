"""The core every framework adapter shares: one ledger session that a framework's agent drives.

A framework keeps its own message list and calls its own model; comal sits at three points of
its loop, through the public API only:

- **record**: what the agent says and does is appended to the ledger as it happens — the
  framework's messages converted to canonical :class:`~comal.messages.Message` values, tool
  results joining the step of the call they answer, each model reply as a step with the request
  record of the assembly that produced it (OBS-1). A framework that hands its whole history to
  every call (pydantic-ai, LangChain) goes through :meth:`LedgerSession.sync`: the part the
  session holds already is matched (:mod:`._line`) and only what follows is appended, so a
  history handed back in (a checkpointer, a second run given the first run's messages) adds
  nothing twice, and a history given to a fresh session is recorded whole. The framework's own
  message ids, where it has them, are kept in a ``framework_keys`` event.
- **branch**: the framework's history is the authority, and the ledger is append-only (LED-1).
  When the framework no longer extends what the session holds — the Agents SDK popped an item
  or cleared the session, a LangChain ``RemoveMessage`` or an edit changed the state, a run was
  given a shorter or another history — the session continues in a *branch*: a new ledger
  session whose ``parent`` is the old one (meta ``branch_of``, ``fork_at``, ``reason``), holding
  the framework's history as it now is; a ``framework_branch`` event in the old session names
  it. Nothing is deleted: every byte stays in the old session for audit and ``comal show``.
  Opening the old session id again (``session=``) follows its branches to the newest one.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from ..agent import Config, house_factory, load_config
from ..context import get_engine
from ..errors import UserError
from ..ledger import Entry, LedgerBackend, Scope, UsageInput
from ..messages import Message, Role, canonical_json, group_messages
from ..ops import Actor, Registry, default_registry
from ..tokens import Usage, count_messages
from ..turns import ContextSession, Turn, configure, unassembled_usage
from ._line import Keyed, match, match_key

__all__ = [
    "BRANCH_EVENT",
    "KEYS_EVENT",
    "Assembled",
    "IntegrationInput",
    "IntegrationUnavailable",
    "LedgerSession",
    "RecallTool",
    "require",
]

KEYS_EVENT = "framework_keys"
BRANCH_EVENT = "framework_branch"
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
    the request record's fields.

    ``entry_ids`` gives, per message, the entry it stands for (``None``: a stand-in), and
    ``kept`` whether it is that entry's message unchanged. ``verbatim``: the assembly is every
    entry of the session, each unchanged, and nothing else — the framework's own messages can
    be sent as they are (their ids, timestamps and fields comal's form does not carry)."""

    messages: tuple[Message, ...]
    meta: dict[str, Any]
    entry_ids: tuple[int | None, ...] = ()
    kept: tuple[bool, ...] = ()
    verbatim: bool = False


class LedgerSession:
    """One ledger session driven by a framework's agent; see the module docstring.

    ``session``: an id to resume (or to create with that id); ``None`` starts a new session.
    ``window``: the model's context window in tokens; ``output_reserve`` what is kept for the
    reply (default: the budget's). ``engine`` and ``settings`` name an engine of the registry and
    its configuration, validated with its ranges. ``config``: the operator's configuration whose
    policy judges the recall calls (its deny rules, limits and protected paths), as on every
    other surface; default: the one every comal command loads (``COMAL_CONFIG``, else the user's
    file, else the defaults).

    ``session_id`` is the id the session was opened with, and stays; ``scope`` is the ledger
    session that holds the framework's history now (a branch of it after a divergence).
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
        config: Config | None = None,
    ) -> None:
        if window < 256:
            raise IntegrationInput(f"window={window} is too small; give the model's window")
        self.ledger = ledger
        self.window = window
        self.output_reserve = output_reserve
        self.framework = framework
        # The engine and its settings are checked before a session exists: a typo creates none.
        self._engine = get_engine(engine)
        self._config = configure(self._engine, settings, ledger.counter, where="settings")
        registry = default_registry()
        found = [registry.get(name) for name in self._engine.model_tools]
        self.registry = Registry([op for op in found if op is not None])
        # The one house factory, from the operator's configuration (its deny rules included).
        operator = config if config is not None else load_config()
        self._houses = house_factory(ledger, operator, self.registry)
        self.actor = Actor.user(f"{framework}:{tenant}")
        self._lock = threading.RLock()
        opened = self._open(session, tenant, agent)
        self.session_id = opened.session
        self._bind(self._follow(opened))

    # -- the session ---------------------------------------------------------------------------
    def _open(self, session: str | None, tenant: str, agent: str) -> Scope:
        source = f"integration:{self.framework}"
        if session is None:
            return self.ledger.create_session(tenant, agent, source=source)
        scope = Scope(tenant, agent, session)
        if self.ledger.session(scope) is not None:
            return scope
        return self.ledger.create_session(tenant, agent, session_id=session, source=source)

    def _follow(self, scope: Scope) -> Scope:
        # A session the framework went another way from continues in its newest branch.
        seen = {scope.session}
        while found := self.ledger.records(scope, "event", kinds=(BRANCH_EVENT,)):
            after = found[-1].body.get("session")
            if not isinstance(after, str) or after in seen:
                break
            seen.add(after)
            scope = Scope(scope.tenant, scope.agent, after)
        return scope

    def _bind(self, scope: Scope) -> None:
        self.scope = scope
        self.service = ContextSession(self.ledger, scope, self._engine, self._config)
        self.house = self._houses.house(scope)
        self._keys: set[str] = set()
        self._open_calls: set[str] = set()
        self._step_calls: set[str] = set()  # every call of the last step, answered or not
        self._last_step: int | None = None
        self._turn: Turn | None = None  # the assembly the next reply answers
        self._line: list[tuple[Keyed, int]] = []
        # Whether a framework's history was matched here yet: the first one may start empty
        # (a resume: the ledger brings the history the framework does not hold).
        self._attached = False
        for record in self.ledger.records(scope, "event", kinds=(KEYS_EVENT,)):
            self._keys.update(str(k) for k in record.body.get("keys", ()))
        for entry in self.ledger.iter_entries(scope):
            self._note(entry)

    def _note(self, entry: Entry) -> None:
        message = entry.message
        if message.tool_calls:
            self._last_step = entry.step
            self._step_calls = {c.id for c in message.tool_calls}
            self._open_calls = set(self._step_calls)
        elif entry.step != self._last_step:
            self._open_calls, self._step_calls = set(), set()
        result = message.tool_result
        if result is not None:
            self._open_calls.discard(result.call_id)
        self._line.append((Keyed(match_key(message), result is not None), entry.id))

    def knows(self, key: str) -> bool:
        """Whether the framework's message ``key`` is recorded."""
        return key in self._keys

    def entries(self) -> list[Entry]:
        return self.ledger.entries(self.scope)

    def held(self) -> int:
        """How many entries the session holds now."""
        return len(self._line)

    @property
    def lock(self) -> threading.RLock:
        """Held around a change that must see the session as it stands (re-entrant)."""
        return self._lock

    def mirrors(self, ids: Sequence[int | None]) -> bool:
        """Whether the framework's history, as :meth:`sync` mapped it (``ids``), is every
        entry of the session and nothing else (not so on a resume: the ledger brought more)."""
        known = [i for i in ids if i is not None]
        return len(known) == len(ids) and sorted(known) == sorted(e for _, e in self._line)

    def agreed(self, messages: Sequence[Message]) -> int:
        """How many of the session's entries ``messages`` agree with, from the start."""
        keyed = [Keyed(match_key(m), m.tool_result is not None) for m in messages]
        return match([k for k, _ in self._line], keyed).line

    # -- record --------------------------------------------------------------------------------
    def record(
        self, items: Sequence[tuple[str | None, Message]], *, once: bool = False
    ) -> list[Entry]:
        """Append ``items`` (key, message) as whole steps: results of the open step join it;
        the rest is grouped into steps as :func:`group_messages` reads them. ``once``: a result
        whose call the open step has answered already (a recall the house recorded) is not
        appended again."""
        with self._lock:
            rest = [m for _, m in items]
            if once:
                rest = [m for m in rest if not self._answers_open(m)]
            if not rest:
                return []
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
                self._keep([k for k, _ in items if k is not None])
            for entry in made:
                self._note(entry)
            return made

    def _answers_open(self, message: Message) -> bool:
        result = message.tool_result
        return (
            result is not None
            and result.call_id in self._step_calls
            and result.call_id not in self._open_calls
        )

    def _reply_usage(self, messages: Sequence[Message]) -> UsageInput | None:
        # A framework that hands the reply over with the rest of its turn (the Agents SDK, a
        # plain history processor) still gets the request record of the assembly it was sent.
        if self._turn is None or messages[0].role is not Role.ASSISTANT:
            return None
        turn, self._turn = self._turn, None
        return turn.usage(_UNKNOWN, protocol=self.framework, fields=self._fields())

    def _fields(self) -> dict[str, Any]:
        """The adapter's own fields of a request record (the turn service writes the rest)."""
        return {"v": 1, "framework": self.framework}

    def _keep(self, keys: Sequence[str]) -> None:
        fresh = [k for k in keys if k not in self._keys]
        if fresh:
            self.ledger.add_record(self.scope, "event", KEYS_EVENT, {"v": 1, "keys": fresh})
            self._keys.update(fresh)

    def record_reply(
        self, message: Message, *, key: str | None = None, usage: Usage | None = None,
        model: str | None = None,
    ) -> Entry | None:  # fmt: skip
        """The model's reply as a step of its own, with the request record of the assembly that
        was sent for it (OBS-1); ``None`` when ``key`` is recorded already."""
        with self._lock:
            if key is not None and key in self._keys:
                return None
            given = usage or _UNKNOWN
            if self._turn is not None:
                made = self._turn.usage(given, model=model, protocol=self.framework,
                                        fields=self._fields())  # fmt: skip
            else:  # a reply the framework asked for without comal's assembly
                made = unassembled_usage(given, model=model, protocol=self.framework,
                                         fields=self._fields())  # fmt: skip
            with self.ledger.atomic():
                entry = self.ledger.append(self.scope, [message], usage=made)[0]
                self._keep([key] if key is not None else [])
            self._turn = None
            self._note(entry)
            return entry

    # -- follow a framework's whole history ----------------------------------------------------
    def sync(
        self, items: Sequence[tuple[str | None, Message]], *, covered: int = 0
    ) -> list[int | None]:
        """Make the session hold ``items``, the framework's whole history (its system prompt
        aside): append what follows the part it holds, or continue in a branch when the
        framework went another way. ``covered``: the history starts with comal's own assembly,
        standing for the session's first ``covered`` entries. The entry id of each item."""
        with self._lock:
            keyed = [Keyed(match_key(m), m.tool_result is not None) for _, m in items]
            line = [k for k, _ in self._line]
            covered = min(covered, len(line))
            found = match(line[covered:], keyed)
            held = covered + found.line
            ids: list[int | None] = [None] * len(items)
            for n, at in found.pairs:
                ids[n] = self._line[covered + at][1]
            resume = not self._attached and covered == 0 and found.line == 0
            self._attached = True
            if held == len(line) or resume:
                new = [items[n] for n in found.rest]
                for n, entry in zip(found.rest, self.record(new), strict=True):
                    ids[n] = entry.id
                return ids
            first = [e.message for e in self.ledger.entries(self.scope)[:covered]]
            made = self.branch([(None, m) for m in first] + list(items), at=held, reason="diverged")
            return [e.id for e in made[covered:]]

    def branch(
        self, items: Sequence[tuple[str | None, Message]], *, at: int, reason: str,
        beside: Callable[[], None] | None = None,
    ) -> list[Entry]:  # fmt: skip
        """Continue in a new ledger session holding ``items``: the old one is kept whole and
        names its branch in a ``framework_branch`` event (``at``: how many of its entries the
        framework still agreed with; ``reason`` why). ``beside`` writes the caller's own
        records in the same transaction, once the branch is the session's scope."""
        with self._lock:
            old = self.scope
            meta = {"branch_of": old.session, "fork_at": at, "reason": reason,
                    "framework": self.framework}  # fmt: skip
            try:
                with self.ledger.atomic():
                    scope = self.ledger.create_session(
                        old.tenant, old.agent, parent=old.session,
                        source=f"integration:{self.framework}", meta=meta,
                    )  # fmt: skip
                    body = {"v": 1, "session": scope.session, "fork_at": at, "reason": reason}
                    self.ledger.add_record(old, "event", BRANCH_EVENT, body)
                    self._bind(scope)
                    self._attached = True
                    made = self.record(items)
                    if beside is not None:
                        beside()
            except BaseException:
                self._bind(old)
                raise
            return made

    # -- assemble ------------------------------------------------------------------------------
    def prepare(
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
            # The turn service's one order; maintenance inline: the framework's call waits.
            turn = self.service.prepare(budget, defer=False)
            self._turn = turn
            view, assembly = turn.view, turn.assembly
            messages, ids = tuple(assembly.messages), tuple(assembly.entry_ids)
            stored = {e.id: e.message for e in (*view.pinned, *view.head, *view.entries)}
            pairs = zip(messages, ids, strict=True)
            kept = tuple(i is not None and stored.get(i) == m for m, i in pairs)
            verbatim = (
                view.checkpoint is None and not view.summaries and all(kept)
                and list(ids) == list(stored) and len(stored) == len(self._line)
            )  # fmt: skip
            return Assembled(messages, turn.record_meta(self._fields()), ids, kept, verbatim)

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
            receipt = self.house.record(
                outcome, join_step=self._last_step if joined else None, append_result=joined
            )
            stored = None if receipt.result_entry is None else self.ledger.entry(
                self.scope, receipt.result_entry
            )  # fmt: skip
            if stored is not None:
                self._note(stored)
            return outcome.result.text, outcome.result.is_error
