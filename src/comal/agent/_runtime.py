"""The one agent factory: what every surface (``comal -p``, the TUI, ``comal context``, the HTTP
API) builds a session's agent, house and human controls with.

:meth:`Runtime.open` takes the operator's sources once — the configuration file, the environment
and a surface's :class:`Flags` (CFG-1, CFG-2) — and a session to resume (or none: a new one is
created with its first prompt, in one transaction, so a failed start leaves nothing behind). It
checks everything that can fail before it creates anything: the configuration, the model spec
and its provider's key, a script file, the workspace. From then on:

- :attr:`Runtime.host` holds the live human controls (model, effort, mode, name): ``/model`` in
  the TUI changes them through the house (OPS-6), and the next :meth:`Runtime.agent` uses them;
- :attr:`Runtime.registry` is the native registry plus the human operations ``context``,
  ``state`` and ``compact`` (:mod:`._human`), so every surface gets one answer (OPS-1);
- :meth:`Runtime.agent` builds the :class:`Agent` for the next run; :meth:`Runtime.proposer`
  the :class:`Proposer` whose :meth:`~Proposer.preview` every status line shows;
- the registry holds the long-work operations too (:func:`comal.work.work_operations`): the
  running agent answers them for its session (:meth:`Runtime.work_agent`), and its work steps
  run the session's model (a ``script:PATH`` session's step n reads ``PATH.children/n.jsonl``)
  or one the operator allows in ``work.models``.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

from ..context import get_engine
from ..errors import ComalError, UserError
from ..ledger import LedgerBackend, Scope, SessionInfo
from ..messages import ToolCall
from ..ops import (
    Actor,
    Approver,
    HostSettings,
    House,
    HouseFactory,
    Outcome,
    Receipt,
    Registry,
    Rule,
    SandboxStatus,
    StopSignal,
    Surface,
    Workspace,
    default_registry,
    sandbox_status,
)
from ..providers import (
    OnEvent,
    Provider,
    ProviderContext,
    SDKProvider,
    check_model_spec,
    model_name_of,
    provider_for,
)
from ..tokens import default_counter
from ..work import WorkAgent
from ._agent import Agent, Clock, OnCallOutput, Preamble, intention, utc_now
from ._catalog import agent_catalog, session_registry
from ._children import SpecModels
from ._config import Config, load_config, settings_from_config
from ._flags import Flags, SessionNotHeld
from ._houses import house_factory
from ._instructions import InstructionFiles
from ._kept import opening, record_settings, served_by
from ._liveness import RUN_ENDED, run_ended_body
from ._lock import PgSessionLock, SessionLock
from ._mcp_servers import MCP_EVENT, McpServers
from ._opening import check_prompt, latest_session, open_workspace
from ._propose import Probe, Proposer, Say
from ._result import RunResult
from ._safe_point import OnDelivered
from ._session import lock_session
from ._settings import AgentSettings

__all__ = ["Flags", "Runtime", "SessionNotHeld", "Watch"]


RULE_EVENT = "rule_added"
# A model name for sessions whose model is unknown (an import): windows resolve to the default.
UNKNOWN_MODEL = "unknown"


def _user() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"


@dataclass(frozen=True)
class Watch:
    """What a surface a person watches hands a run (DRV-2, DRV-3): their ``stop``, where a
    running call's output goes (``output(call_id, stream, text)``), and what to do as each
    message they sent while it worked goes in (``delivered``)."""

    stop: StopSignal | None = None
    output: OnCallOutput | None = None
    delivered: OnDelivered | None = None

    def agent_kw(self) -> dict[str, Any]:
        return {"stop": self.stop, "on_output": self.output, "on_delivered": self.delivered}


@dataclass
class Runtime:
    """A session's runtime for one surface process; build it with :meth:`open`."""

    ledger: LedgerBackend
    config: Config
    flags: Flags
    workspace: Workspace
    host: HostSettings
    scope: Scope | None = None
    user: str = field(default_factory=_user)
    registry: Registry = field(init=False)
    # A provider for every model (tests, applications embedding comal); None: from the spec.
    fixed_provider: Provider | None = None
    # The time a prompt's preamble states (CCH-1); a test freezes it here.
    clock: Clock = utc_now
    active: Agent | None = field(default=None, init=False)
    # Rules a human added during this process ("always allow" in the TUI), after the config's.
    extra_rules: list[Rule] = field(default_factory=list, init=False)
    _held: SessionLock | PgSessionLock | None = field(default=None, init=False, repr=False)
    _providers: dict[str, Provider] = field(default_factory=dict, init=False, repr=False)
    mcp: McpServers = field(init=False, repr=False)
    # DRV-4: the engine a resumed session keeps (None: the configuration's), and what opening
    # the session has to say once (a model chosen from the keys, the settings it keeps).
    kept_engine: str | None = field(default=None, init=False)
    notes: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.registry = session_registry()
        self.mcp = McpServers(self.config.mcp_servers)

    # -- building -----------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        ledger: LedgerBackend,
        flags: Flags = Flags(),
        *,
        resume: str | None = None,
        latest: bool = False,
        config: Config | None = None,
        need_model: bool = True,
        provider: Provider | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """The runtime for session ``resume`` (a unique id prefix), the tenant's latest session
        (``latest``: ``comal -c``), or a new one created with its first prompt. With
        ``need_model`` (running the agent) a missing model, an unknown provider or a missing
        key is an error now, before anything is written."""
        if resume and latest:
            raise UserError(
                f"-c (continue the latest session) and --resume {resume} name two sessions; "
                "give one of them"
            )
        config = config if config is not None else load_config()
        config = config.merged(flags.overrides(config))
        previous: SessionInfo | None = None
        if resume:
            previous = ledger.session(ledger.resolve(resume))
        elif latest:
            previous = latest_session(ledger, config.tenant, config.agent)
        # DRV-4: a resumed session keeps its model, mode, effort and engine; a flag changes them.
        opened = opening(ledger, config, flags, previous, need_model=need_model)
        spec = opened.spec
        # RES-6: a resumed session works where it was started, whatever the current directory;
        # the new process's rules, sandbox and limits still apply.
        stored = previous.workspace if previous is not None else None
        root = flags.workspace or (Path(stored) if stored else None)
        workspace = open_workspace(root or Path.cwd())
        host = HostSettings(
            mode=opened.mode,
            model=spec or None,
            effort=opened.effort,
            name=previous.title if previous is not None else None,
        )
        scope = previous.scope if previous is not None else None
        runtime = cls(ledger, config, flags, workspace, host, scope, fixed_provider=provider)
        runtime.kept_engine = opened.engine
        runtime.notes = list(opened.notes)
        if clock is not None:
            runtime.clock = clock
        if need_model and spec:
            runtime.check_model(spec)
        return runtime

    def reopen(self, resume: str | None = None) -> Runtime:
        """This process's runtime for another session (the TUI's ``/resume``) or a new one
        (``None``: ``/clear``), with the same configuration, flags, provider, clock and user. A
        new session keeps the model chosen now; a resumed one takes its own unless the command
        line named one. Rules a human added ("always") stay with the session they were for."""
        # The configuration already holds the flags' rules: merged again they would repeat.
        flags = replace(self.flags, allow=(), deny=())
        if resume is None:
            flags = replace(flags, model=self.spec)
        runtime = Runtime.open(
            self.ledger,
            flags,
            resume=resume,
            config=self.config,
            provider=self.fixed_provider,
            clock=self.clock,
        )
        runtime.user = self.user
        return runtime

    def check_model(self, spec: str) -> None:
        """Everything about a model spec that can fail before a request: the provider name,
        its key, a script file (coded errors, nothing written); its scheme says what. A
        runtime given its provider (a test, an embedding application) answers every model with
        it: nothing to check."""
        if self.fixed_provider is None:
            check_model_spec(spec)

    @property
    def spec(self) -> str | None:
        return self.host.model

    @property
    def model_name(self) -> str:
        """The model name requests carry (``script`` for a scripted model)."""
        # A spec no scheme reads (an imported transcript's deepseek/deepseek-chat) still
        # names the model for the window catalog.
        return model_name_of(self.spec) if self.spec else UNKNOWN_MODEL

    def settings(self) -> AgentSettings:
        """The frozen settings of the next run, from the configuration and the live controls."""
        agent = self.scope.agent if self.scope is not None else self.config.agent
        settings = settings_from_config(
            self.config, self.model_name, agent=agent, context_window=self.flags.context_window
        )
        if self.host.effort != settings.effort:
            settings = replace(settings, effort=self.host.effort)
        if self.kept_engine is not None and self.kept_engine != settings.engine_name:
            engine = self.config.engine_config(agent, engine=self.kept_engine)
            settings = replace(settings, engine_name=self.kept_engine, engine=engine)
        # The instruction files travel in the system prompt (DRV-1), which every engine sends
        # whole: the pipeline is not given them again to re-inject after a summary.
        return settings

    def provider(self) -> Provider:
        if self.fixed_provider is not None:
            return self.fixed_provider
        spec = self.spec
        if not spec:
            raise UserError("no model for this session: pass --model provider:model")
        found = self._providers.get(spec)
        if found is None:
            # The script model reads its position from the session: it gets the ledger, and
            # how many of the session's requests it answered (it may have joined it late).
            context = ProviderContext(
                ledger=self.ledger, scope=self.scope, served=self._served(spec)
            )
            found = provider_for(spec, context)
            if isinstance(found, SDKProvider):
                # An SDK client is reused and closed with the runtime; anything else is built
                # afresh each run (a script edited between two prompts is read again).
                self._providers[spec] = found
        return found

    def _served(self, spec: str) -> Callable[[], int | None] | None:
        scope = self.scope
        if scope is None:
            return None
        return lambda: served_by(self.ledger, scope, spec)

    def record_settings(self, say: Say | None = None) -> None:
        """A run that takes other settings than the session recorded says so and records it
        (``session_settings``), so the next resume keeps them (DRV-4)."""
        host, engine = self.host, self.settings().engine_name
        now = {"model": self.spec, "mode": host.mode, "effort": host.effort, "engine": engine}
        record_settings(self.ledger, self.need_scope(), now, self.flags, say)

    def houses(self, approver: Approver | None = None) -> HouseFactory:
        """The factory of this session's houses (the agent's, its children's, the human
        controls'), from the configuration and the rules added during this process."""
        return house_factory(
            self.ledger,
            self.config,
            self.registry,
            workspace=self.workspace,
            approver=approver,
            settings=self.host,
            rules=self.extra_rules,
            guard=self._holding,
            host=self,
        )

    def house(self, approver: Approver | None = None) -> House:
        return self.houses(approver).house(self.need_scope())

    def sandbox_status(self) -> SandboxStatus:
        """Whether Bash will run in the OS sandbox under this configuration (issue 9)."""
        return sandbox_status(self.houses().policy.sandbox)

    def add_rule(self, rule: Rule, *, by: Actor) -> None:
        """A rule a human added for the rest of this process's session ("always allow"),
        recorded as an event so the ledger says who widened the policy and when."""
        self.extra_rules.append(rule)
        if self.active is not None:
            # The running agent's house judges its next call with the rule already.
            house = self.active.house
            house.policy = house.policy.with_rules(rule)
        if self.scope is not None:
            body = {"v": 1, "rule": str(rule), "action": rule.action, "by": by.id}
            self.ledger.add_record(self.scope, "event", RULE_EVENT, body)

    def work_agent(self, scope: Scope) -> WorkAgent | None:
        """:class:`~comal.work.WorkHost`: the running agent serves its own session."""
        active = self.active
        return active.coordinator if active is not None and active.scope == scope else None

    def _holding(self) -> None:
        """The house's guard: calls with effects run only while this runtime holds the
        session's lock (inside :meth:`run`), never beside another process's agent."""
        if self._held is None:
            raise SessionNotHeld(
                f"session {self.need_scope().session}: a call with effects needs the session's "
                "lock, and this process does not hold it (another agent may be running); run it "
                "through the agent, or wait and resume"
            )

    @property
    def context_window(self) -> int | None:
        """The window the surface was given (``--context-window``), if any."""
        return self.flags.context_window

    def queue_compact(self) -> bool:
        """LIM-7: when this process's agent is working, ask it to compact at the start of its
        next turn (``True``); ``False`` when no agent of this runtime runs."""
        if self.active is None:
            return False
        self.active.request_compact()
        return True

    def need_scope(self) -> Scope:
        if self.scope is None:
            raise UserError("this session has not started yet: give it a first prompt")
        return self.scope

    def proposer(self) -> Proposer:
        """A proposer for previews (``/context``): no provider, the catalog the agent sends."""
        settings = self.settings()
        house = self.house()
        self.start_mcp(house)  # the preview shows the tools the agent will really send
        catalog = agent_catalog(house.registry, get_engine(settings.engine_name))
        files = InstructionFiles(self.workspace)
        scope = self.need_scope()
        return Proposer(self.ledger, scope, None, settings, catalog, run="preview", files=files)

    def start_mcp(self, house: House, say: Say | None = None) -> None:
        """Start the configured MCP servers (once) in ``house``'s sandbox, their tools in the
        registry; each start is an ``mcp_started`` event, and ``say`` hears any notice."""
        for started in self.mcp.start(self.registry, house.sandbox()):
            if self.scope is not None:
                self.ledger.add_record(self.scope, "event", MCP_EVENT, {"v": 1} | started)
            if say is not None and started["notice"]:
                say("warn", started["notice"])

    def agent(
        self,
        *,
        approver: Approver | None = None,
        say: Say | None = None,
        on_event: OnEvent | None = None,
        probe: Probe | None = None,
        watch: Watch | None = None,
    ) -> Agent:
        house = self.house(approver)
        self.start_mcp(house, say)
        agent = Agent(
            self.ledger,
            self.need_scope(),
            self.provider(),
            house,
            self.settings(),
            actor=Actor.user(self.user),
            on_event=on_event,
            say=say,
            probe=probe,
            clock=self.clock,
            children=SpecModels(
                self.spec, tuple(self.config.work.models), self.ledger, self.fixed_provider
            ),
            **(watch.agent_kw() if watch is not None else {}),
        )
        return agent

    # -- running ------------------------------------------------------------------------------
    def start(self, prompt: str) -> Scope:
        """Create the session and store its first prompt in one transaction (no session is
        left empty by a start that fails); returns its scope."""
        if self.scope is not None:
            raise UserError(f"session {self.scope.session} has already started")
        settings = self.settings()
        title = prompt.strip().splitlines()[0][:80] if prompt.strip() else None
        meta = {
            "model": self.spec,
            "workspace": str(self.workspace.root),
            "engine": settings.engine_name,
            "mode": self.host.mode,
        }
        if self.host.effort:
            meta["effort"] = self.host.effort
        # One transaction: a start that fails leaves no empty session behind.
        preamble = Preamble(self.clock(), self.workspace.root, self.user)
        scope = self.ledger.create_session(
            self.config.tenant,
            self.config.agent,
            title=title,
            meta=meta,
            messages=[intention(prompt, settings, preamble=preamble)],
        )
        self.scope = scope
        return scope

    def lock(self) -> SessionLock | PgSessionLock:
        return lock_session(self.ledger, self.need_scope())

    def run(
        self,
        prompt: str | None,
        *,
        approver: Approver | None = None,
        say: Say | None = None,
        on_event: OnEvent | None = None,
        probe: Probe | None = None,
        held: SessionLock | PgSessionLock | None = None,
        watch: Watch | None = None,
    ) -> RunResult:
        """One run under the session's lock: a new session starts with ``prompt``; an existing
        one gets it appended (unless it is the same unanswered prompt) or resumes without.
        ``held``: the lock, taken by the caller, who keeps it after the run and releases it
        (a server's worker answers other workers' requests until it lets go). ``watch``: what
        a surface with a person watching adds (:class:`Watch`: their stop, the running output,
        their queued messages as they go in)."""
        check_prompt(prompt)
        fresh = self.scope is None
        if fresh:
            if prompt is None:
                raise UserError("nothing to do: give a prompt with -p, or --resume a session")
            self.start(prompt)
        taken = contextlib.nullcontext(held) if held is not None else self.lock()
        with taken as held:
            self._held = held
            if not fresh:
                self.record_settings(say)
            agent = self.agent(
                approver=approver, say=say, on_event=on_event, probe=probe, watch=watch
            )
            self.active = agent
            try:
                result = agent.run(None if fresh else prompt)
            except ComalError as exc:
                # Read while the ledger is open: the partial run's receipts and usage.
                result = agent.result("error", exc)
            finally:
                self.active = None
                self._held = None
            self._ended(result)
            return result

    def _ended(self, result: RunResult) -> None:
        """The run's end, recorded while the lock is held: a session mid-task without one
        after its last step crashed (:mod:`._liveness`)."""
        scope = self.need_scope()
        last = self.ledger.tail(scope, n=1)
        at = last[-1].seq + 1 if last else 0
        code = result.error.get("code") if result.error else None
        self.ledger.add_record(scope, "event", RUN_ENDED, run_ended_body(result.status, code, at))

    def control(
        self,
        name: str,
        args: dict[str, Any],
        *,
        surface: Surface = "cli",
        actor: Actor | None = None,
    ) -> Outcome:
        """A human's call on a human surface (``context``, ``state``, ``compact``, the
        controls), judged and receipted by the house; see :meth:`call` for one with effects."""
        return self._handle(name, args, surface, actor)[0]

    def _handle(
        self, name: str, args: dict[str, Any], surface: Surface, actor: Actor | None
    ) -> tuple[Outcome, Receipt]:
        if surface == "model":
            raise UserError("human operations run on the cli, tui or api surface")
        call = ToolCall(f"{surface}-{uuid.uuid4().hex[:12]}", name, json.dumps(args))
        return self.house().handle(call, actor or Actor.user(self.user), surface=surface)

    def call(
        self, name: str, args: dict[str, Any], *, surface: Surface = "cli"
    ) -> tuple[Outcome, Receipt]:
        """Any operation of the registry, called by this process's user on a human surface
        (``comal call``): judged and receipted like the model's calls; one with effects runs
        under the session's lock, as an agent's would (:class:`SessionLocked` when another
        process holds it). Returns the outcome and the stored receipt."""
        if self.registry.get(name) is None and name.startswith("mcp__"):
            self.start_mcp(self.house())  # the configured servers' tools join the registry
        op = self.registry.get(name)
        if op is None or op.read_only:
            return self._handle(name, args, surface, None)
        with self.lock() as held:
            self._held = held
            try:
                return self._handle(name, args, surface, None)
            finally:
                self._held = None

    def close(self) -> None:
        self.mcp.close()
        for provider in self._providers.values():
            if isinstance(provider, SDKProvider):
                provider.close()
        self._providers.clear()

    @contextlib.contextmanager
    def closing(self) -> Iterator[Runtime]:
        try:
            yield self
        finally:
            self.close()


def tools_tokens() -> int:
    return default_counter().count(default_registry().catalog("model").json("anthropic"))
