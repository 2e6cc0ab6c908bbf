"""Agent sessions that run in the server (SRF-1): one worker thread per working session.

A :class:`LiveSession` holds one session's :class:`~comal.agent.Runtime` (the one factory every
surface builds an agent with) and runs its prompts in a worker thread of the server, exactly as
the TUI runs them in its worker: ``Runtime.run`` takes the session's lock for the run, so a
``comal -p`` beside it is refused, and a lock left by a killed server is cleared and recorded by
the next run (RES-2). The worker reports what the TUI shows through ``say``, ``on_event`` and the
loop's and the house's probes; :mod:`._web_events` turns that and the ledger into server-sent
events. An approval is asked through the ledger (:class:`~comal.agent._approvals.LedgerApprover`)
and answered by the ``approve`` operation.

A worker that raises anything at all is recorded (``web_worker_crashed``) and reported; the
server, and every other session, go on. A thread cannot survive what kills its process (a
segmentation fault, ``os._exit``): that takes the server down with its workers, and the next
prompt resumes each session from the ledger as ``comal --resume`` would (RES-1).

Who may start what is the operator's: ``serve.workspaces`` and ``serve.models`` in the
configuration (CFG-2); nothing a client sends widens them.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

from ..agent import Config, Flags, Runtime, house_factory, load_config
from ..agent._approvals import LedgerApprover, answer, pending
from ..agent._interrupt import Interrupted, Interrupter
from ..agent._steering import STEERING_OPERATIONS, always_rule
from ..errors import ComalError, UserError
from ..ledger import LedgerBackend, SessionInfo
from ..messages import ToolCall
from ..ops import Actor, HouseFactory, Outcome, Rule, default_registry
from ..providers import StreamDone, StreamEvent, TextDelta, normalize_model_spec
from ._config import ServeConfig

__all__ = [
    "AgentBusy",
    "Interrupted",
    "LiveSession",
    "ModelNotAllowed",
    "WebSessions",
    "WorkspaceNotAllowed",
]

log = logging.getLogger("comal.serve")

CRASH_EVENT = "web_worker_crashed"
GONE = Actor.operator("comal:web")
# Deltas of a long session are many; the page reads the transcript from the ledger, so only
# the newest events need to stay for a reconnecting page.
_KEEP = 4_000


class WorkspaceNotAllowed(UserError):
    code = "WORKSPACE_NOT_ALLOWED"


class ModelNotAllowed(UserError):
    code = "MODEL_NOT_ALLOWED"


class AgentBusy(UserError):
    code = "AGENT_BUSY"


class WebRuntime(Runtime):
    """A runtime whose host also steers its loop (:class:`~comal.agent._steering.Steering`):
    the house hands it to the ``prompt`` and ``interrupt`` operations."""

    live: LiveSession | None = None

    def submit(self, prompt: str | None, by: Actor) -> dict[str, Any]:
        return self._live().submit(prompt, by)

    def interrupt(self, by: Actor) -> bool:
        return self._live().interrupt(by)

    def allow_always(self, rule: Rule, by: Actor) -> None:
        self.add_rule(rule, by=by)

    def _live(self) -> LiveSession:
        if self.live is None:
            raise UserError("this runtime has no worker of the server")
        return self.live

    def houses(self, approver: Any = None) -> HouseFactory:
        factory = super().houses(approver)
        live = self.live
        return factory if live is None else factory.but(probe=live.house_phase)


class LiveSession:
    """One session's runtime and its worker; ``events_after(n)`` is what the page is told."""

    def __init__(self, runtime: WebRuntime, tenant: str) -> None:
        self.runtime = runtime
        runtime.live = self
        self.tenant = tenant
        self.session = runtime.need_scope().session
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._first = 1
        self._stop = Interrupter(self.session)
        self._thread: threading.Thread | None = None
        self.crashed: dict[str, str] | None = None
        # The first prompt is stored with the session (one transaction): its run answers it.
        self.started_with: str | None = None

    # -- events -------------------------------------------------------------------------------
    def emit(self, kind: str, **data: Any) -> None:
        with self._cond:
            n = self._first + len(self._events)
            self._events.append({"id": n, "kind": kind} | data)
            if len(self._events) > _KEEP:
                drop = len(self._events) - _KEEP
                del self._events[:drop]
                self._first += drop
            self._cond.notify_all()

    def events_after(self, n: int) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._events if e["id"] > n]

    @property
    def last_event(self) -> int:
        with self._cond:
            return self._first + len(self._events) - 1

    @property
    def working(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    # -- steering (the operations' host) -------------------------------------------------------
    def submit(self, prompt: str | None, by: Actor) -> dict[str, Any]:
        with self._cond:
            if self.working:
                raise AgentBusy(
                    f"session {self.session}: the agent is working; wait for its answer or "
                    "interrupt it"
                )
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._work, args=(prompt, by), name=f"comal-web-{self.session[:8]}"
            )
            self._thread.daemon = True
            self._thread.start()
        return {"session": self.session, "working": True}

    def interrupt(self, by: Actor) -> bool:
        if not self.working:
            return False
        self._stop.request()
        self.emit("interrupting", by=by.id)
        return True

    def join(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # -- the worker ----------------------------------------------------------------------------
    def _work(self, prompt: str | None, by: Actor) -> None:
        rt = self.runtime
        scope = rt.need_scope()
        self.crashed = None
        self.emit("working", by=by.id)
        approver = LedgerApprover(rt.ledger, scope, stop=self._stop.is_set, on_request=self._asked)
        # The prompt's sender is the person the server authenticated (the preamble says so).
        rt.user = by.id
        stored = prompt is not None and prompt == self.started_with
        self.started_with = None
        try:
            result = rt.run(
                None if stored else prompt,
                approver=approver,
                say=self._say,
                on_event=self._stream,
                probe=self._phase,
            )
            answered = result.answer if result.status == "finished" else None
            self.emit("stopped", status=result.status, answer=answered, error=result.error)
        except ComalError as exc:
            self.emit("stopped", status="error", answer=None, error=_coded(exc))
        except BaseException as exc:
            self._crash(exc)

    def _crash(self, exc: BaseException) -> None:
        log.exception("web session %s: the worker crashed", self.session)
        what = {"type": type(exc).__name__, "message": str(exc)[:2_000]}
        self.crashed = what
        try:
            body = {"v": 1, "session": self.session} | what
            self.runtime.ledger.add_record(self.runtime.need_scope(), "event", CRASH_EVENT, body)
        except BaseException:
            log.exception("web session %s: the crash could not be recorded", self.session)
        self.emit("crashed", **what)

    def _asked(self, body: dict[str, Any]) -> None:
        rule = always_rule(self.runtime.registry, body["operation"], body["arguments"])
        self.emit("approval", request=body | {"always": None if rule is None else str(rule)})

    def _say(self, kind: str, text: str) -> None:
        if kind == "call":
            name, _, arguments = text.partition(" ")
            self.emit("call", name=name, arguments=arguments)
        else:
            self.emit(kind, text=text)

    def _stream(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.emit("delta", text=event.text)
        elif isinstance(event, StreamDone):
            self.emit("streamed")

    def _phase(self, phase: str, detail: str) -> None:
        if phase == "delegated":
            self.emit("child_started", child=detail)
        self._stop.probe(phase, detail)

    def house_phase(self, phase: str, call_id: str) -> None:
        if phase == "judged":
            self.emit("judged", call_id=call_id)
        elif phase == "executed":
            self.emit("executed", call_id=call_id)


def _coded(exc: ComalError) -> dict[str, str]:
    return {"code": exc.code, "message": str(exc)}


class WebSessions:
    """The server's live sessions, by id; each is reached only through its tenant's lookup."""

    def __init__(self, config: ServeConfig, ledger: LedgerBackend) -> None:
        self.config = config
        self.ledger = ledger
        self._live: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        self._operator: Config | None = config.operator

    def operator(self) -> Config:
        if self._operator is None:
            self._operator = load_config()
        return self._operator

    def workspaces(self) -> list[str]:
        return [str(Path(w).expanduser().resolve()) for w in self.operator().serve.workspaces]

    def models(self) -> list[str]:
        config = self.operator()
        found = [*([config.model] if config.model else []), *config.serve.models]
        # As sessions store them (a script's path absolute), so a resume finds its own.
        return list(dict.fromkeys(normalize_model_spec(spec) for spec in found))

    def check_workspace(self, asked: str | None) -> Path:
        allowed = self.workspaces()
        if not allowed:
            raise WorkspaceNotAllowed(
                "this server runs no agent: its operator lists no workspace; add directories "
                "to serve.workspaces in the configuration file"
            )
        target = Path(asked).expanduser().resolve() if asked else Path(allowed[0])
        for root in map(Path, allowed):
            if target == root or root in target.parents:
                return target
        raise WorkspaceNotAllowed(
            f"workspace {asked!r} is not one the operator allows ({', '.join(allowed)}); "
            "pick one of them or ask the operator to add it to serve.workspaces"
        )

    def check_model(self, asked: str | None) -> str:
        allowed = self.models()
        spec = normalize_model_spec(asked) if asked else (allowed[0] if allowed else None)
        if spec is None or spec not in allowed:
            raise ModelNotAllowed(
                f"model {asked!r} is not one this server offers ({', '.join(allowed) or 'none'}); "
                "the operator lists them in model and serve.models"
            )
        return spec

    def start(
        self, tenant: str, by: Actor, prompt: str, *, model: str | None, **flags: Any
    ) -> tuple[LiveSession, Outcome]:
        """A new session in an allowed workspace with an allowed model, started with its first
        prompt (one transaction), then run by the ``prompt`` operation."""
        workspace = self.check_workspace(flags.pop("workspace", None))
        spec = self.check_model(model)
        runtime = WebRuntime.open(
            self.ledger,
            Flags(model=spec, workspace=workspace, tenant=tenant, **flags),
            config=self.operator(),
        )
        runtime.user = by.id
        try:
            runtime.start(prompt)
        except BaseException:
            runtime.close()
            raise
        live = LiveSession(runtime, tenant)
        live.started_with = prompt
        with self._lock:
            self._live[live.session] = live
        return live, self.operate(live, "prompt", {"prompt": prompt}, by)

    def get(self, info: SessionInfo) -> LiveSession | None:
        with self._lock:
            return self._live.get(info.id)

    def live(self, info: SessionInfo) -> LiveSession:
        """The session's live runtime; one the server does not hold yet (started elsewhere, or
        before a restart) is opened as ``comal --resume`` opens it, in an allowed workspace
        with an allowed model."""
        with self._lock:
            found = self._live.get(info.id)
            if found is not None:
                return found
            self.check_workspace(info.workspace or None)
            self.check_model(str(info.meta.get("model") or "") or None)
            runtime = WebRuntime.open(
                self.ledger, Flags(tenant=info.tenant), resume=info.id, config=self.operator()
            )
            self._orphans(info)
            live = LiveSession(runtime, info.tenant)
            self._live[info.id] = live
            return live

    def _orphans(self, info: SessionInfo) -> None:
        """Approvals whose waiting worker died with an earlier server are answered "refused"
        (its call is judged afresh when the session resumes), so none waits forever."""
        for asked in pending(self.ledger, info.scope):
            answer(
                self.ledger,
                info.scope,
                str(asked["id"]),
                granted=False,
                by=GONE,
                reason="the worker that asked is gone (the server stopped); the call is judged "
                "again when the session resumes",
            )

    def operate(self, live: LiveSession, name: str, args: dict[str, Any], by: Actor) -> Outcome:
        """A human operation on the ``api`` surface, judged and receipted with ``by``."""
        outcome = live.runtime.control(name, args, surface="api", actor=by)
        live.emit("operation", name=name, by=by.id, is_error=outcome.result.is_error)
        return outcome

    def asks(self, info: SessionInfo) -> list[dict[str, Any]]:
        """The session's pending approvals; for a session this server runs, each says the rule
        "always" would add (none where the call has no subject to pin one to)."""
        live = self.get(info)
        found = pending(self.ledger, info.scope)
        for ask in found:
            rule = None
            if live is not None:
                rule = always_rule(live.runtime.registry, ask["operation"], ask["arguments"])
            ask["always"] = None if rule is None else str(rule)
        return found

    def approve(self, info: SessionInfo, args: dict[str, Any], by: Actor) -> Outcome:
        """The ``approve`` operation for any agent of the tenant: this server's worker, or one
        running elsewhere beside a shared ledger (``comal -p`` with a ledger approver), whose
        house is built here by the one factory with no host (the answer is the ledger's)."""
        live = self.get(info)
        if live is not None:
            return self.operate(live, "approve", args, by)
        registry = default_registry()
        registry.add_all(STEERING_OPERATIONS)
        house = house_factory(self.ledger, self.operator(), registry).house(info.scope)
        call = ToolCall(f"api-{uuid.uuid4().hex[:12]}", "approve", json.dumps(args))
        return house.handle(call, by, surface="api")[0]

    def close(self) -> None:
        """Interrupt every worker and give each a moment to stop at its next phase."""
        with self._lock:
            lives = list(self._live.values())
        for live in lives:
            live.interrupt(GONE)
        for live in lives:
            live.join(timeout=5)
            live.runtime.close()
