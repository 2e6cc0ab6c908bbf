"""Agent sessions that run in the server (SRF-1), whichever worker a request reaches.

Each worker keeps a :class:`~comal.serve._web_runtime.LiveSession` for the sessions it was
asked about; the one that holds a session's lock runs its agent (:mod:`._web_owner`). A
request is answered by the worker it reached, one of two ways:

- what reads or writes only the ledger — ``context``, ``state``, ``cost``, ``compact`` (which
  takes the lock itself, or queues the compaction for the agent that holds it), ``name`` —
  is answered there, with the controls the ledger says the session has;
- what steers the agent — ``prompt``, ``interrupt``, the controls ``model``, ``effort`` and
  ``mode``, an ``approve`` — runs there if this worker runs the agent, or if it can take the
  session's lock (nothing runs it: a prompt starts the run under that lock); otherwise the
  session runs elsewhere and a prompt is queued in the ledger for the agent that runs it
  (DRV-3, :mod:`comal.agent._queue`: it goes in at that agent's next safe point), an approval
  is written to the ledger the running agent waits on, and the rest goes through the
  session's inbox (:mod:`._web_inbox`) to the holder of the lock, whose answer comes back, or
  a coded :class:`OwnerNotAnswering` after a bounded wait (the holder may be a ``comal -p``,
  which takes no requests).

A message queued as a run ends, after that agent's last look, is not lost: whichever worker
lets the session's lock go next looks for messages still waiting and, taking the lock back,
starts a run that delivers them (:meth:`WebSessions.kick`).

Who may start what is the operator's (:mod:`._web_allowed`): a mode or model outside
``serve.modes`` / ``serve.models`` is refused where the request arrives and again where it
runs, and a session opened or resumed anywhere takes only what they allow now.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from functools import partial
from typing import Any

from ..agent import Config, Flags, house_factory, load_config, lock_session
from ..agent._approvals import answer, pending
from ..agent._interrupt import Interrupted
from ..agent._kept import kept_settings
from ..agent._queue import pending as queued_messages
from ..agent._steering import STEERING_OPERATIONS, always_rule
from ..errors import ComalError, UserError
from ..ledger import LedgerBackend, Scope, SessionInfo, SessionLocked
from ..messages import ToolCall
from ..ops import Actor, Outcome, default_registry
from ._config import ServeConfig
from ._web_allowed import Allowed, ModelNotAllowed, WorkspaceNotAllowed
from ._web_inbox import Command, ask, cancel, state_of
from ._web_owner import POLL_S, Hold, worker_name
from ._web_runtime import AgentBusy, LiveSession, WebRuntime
from ._web_views import gauge_view

__all__ = [
    "AgentBusy",
    "Interrupted",
    "LiveSession",
    "OwnerNotAnswering",
    "WebRuntime",
    "WebSessions",
    "outcome_body",
]

log = logging.getLogger("comal.serve")

GONE = Actor.operator("comal:web")
# Answered by whichever worker a request reaches: they read the ledger, or write it safely
# beside a running agent (compact queues itself for the agent that holds the lock).
ANYWHERE = frozenset({"context", "state", "cost", "compact", "name"})
# How long a request waits for the holder of the lock to take it from the inbox, how long for
# its answer once taken, and how long a prompt waits for a lock being let go.
RELAY_S = 10.0
TAKEN_S = 30.0
CLAIM_S = 2.0


class OwnerNotAnswering(UserError):
    """The process that runs the session did not take the request in time."""

    code = "OWNER_NOT_ANSWERING"


class Relayed(UserError):
    """The coded error the process that runs the session answered a request with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def outcome_body(outcome: Outcome) -> dict[str, Any]:
    """A human operation's outcome as the API answers it (and the inbox carries it)."""
    return {
        "operation": outcome.receipt.operation,
        "text": outcome.result.text,
        "is_error": outcome.result.is_error,
        "observations": dict(outcome.receipt.observations),
        "call_id": outcome.receipt.call_id,
        "status": outcome.receipt.status,
        "actor": outcome.receipt.actor.as_dict(),
    }


class WebSessions:
    """The server's sessions, by id; each is reached only through its tenant's lookup."""

    def __init__(self, config: ServeConfig, ledger: LedgerBackend) -> None:
        self.config = config
        self.ledger = ledger
        self._live: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        self._operator: Config | None = config.operator
        self.allowed = Allowed(self.operator)

    def operator(self) -> Config:
        if self._operator is None:
            self._operator = load_config()
        return self._operator

    # -- sessions ------------------------------------------------------------------------------
    def start(
        self, tenant: str, by: Actor, prompt: str, *, model: str | None, **flags: Any
    ) -> tuple[LiveSession, dict[str, Any]]:
        """A new session in an allowed workspace with an allowed model and mode, started with
        its first prompt (one transaction), then run by the ``prompt`` operation."""
        workspace = self.allowed.check_workspace(flags.pop("workspace", None))
        spec = self.allowed.check_model(model)
        mode = self.allowed.check_mode(flags.pop("mode", None))
        # Not named by the page: the engine this server runs (serve --engine, else the
        # configuration's), as its proxy does.
        flags["engine"] = flags.get("engine") or self.config.engine
        runtime = WebRuntime.open(
            self.ledger,
            Flags(model=spec, workspace=workspace, tenant=tenant, mode=mode, **flags),
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
        live.after = partial(self.kick, live)
        with self._lock:
            self._live[live.session] = live
        return live, self._prompt(live, {"prompt": prompt}, by)

    def get(self, info: SessionInfo) -> LiveSession | None:
        with self._lock:
            return self._live.get(info.id)

    def live(self, info: SessionInfo) -> LiveSession:
        """This worker's runtime of the session, opened as ``comal --resume`` opens it, in an
        allowed workspace with an allowed model, and the mode, engine and effort it ran with
        last (its mode only where the ceiling still allows it). Opening it takes nothing: the
        session may run in another worker meanwhile."""
        with self._lock:
            found = self._live.get(info.id)
            if found is not None:
                return found
            self.allowed.check_workspace(info.workspace or None)
            # What the session ran with last (DRV-4): Runtime.open keeps its model, engine and
            # effort itself; its mode is passed only through the operator's ceiling.
            kept = kept_settings(self.ledger, info)
            self.allowed.check_model(str(kept.get("model") or "") or None)
            started = str(kept.get("mode") or "")
            flags = Flags(
                tenant=info.tenant,
                mode=started if started in self.allowed.modes() else self.allowed.default_mode(),
            )
            runtime = WebRuntime.open(self.ledger, flags, resume=info.id, config=self.operator())
            live = LiveSession(runtime, info.tenant)
            live.after = partial(self.kick, live)
            self._live[info.id] = live
            return live

    def working(self, info: SessionInfo) -> bool:
        """Whether some process runs the session now: this worker, or whoever holds its lock."""
        live = self.get(info)
        if live is not None and live.working:
            return True
        return self.ledger.session_lock_holder(info.scope) is not None

    def reader(self, info: SessionInfo) -> LiveSession:
        """The session's runtime for an answer from the ledger, its controls brought up to
        date (those of this worker's own run are already)."""
        live = self.live(info)
        if not live.working:
            live.runtime.follow_controls(self.allowed.permits)
        return live

    # -- the one path of every human operation -------------------------------------------------
    def steer(
        self, info: SessionInfo, name: str, args: dict[str, Any], by: Actor
    ) -> dict[str, Any]:
        """A human operation on the ``api`` surface, judged and receipted with ``by``, in the
        worker that may run it (see the module docstring)."""
        self.allowed.check_args(name, args)
        if name in ANYWHERE:
            return outcome_body(self.operate(self.reader(info), name, args, by))
        live = self.live(info)
        if name == "prompt":
            return self._prompt(live, args, by)
        with live.guard:
            if live.working:
                return outcome_body(self.operate(live, name, args, by))
            hold = self.claim(live)
            if hold is not None:
                try:
                    return outcome_body(self.operate(live, name, args, by))
                finally:
                    hold.release()
                    self.kick(live)
        if name == "approve" and not args.get("always"):
            return outcome_body(self._answer_beside(info, args, by))
        return self._relay(live, name, args, by)

    def approve(self, info: SessionInfo, args: dict[str, Any], by: Actor) -> dict[str, Any]:
        """The ``approve`` operation for any agent of the tenant: one of this server's, or one
        running elsewhere beside a shared ledger (``comal -p`` with a ledger approver) in a
        workspace the web may not run in, answered through the ledger it waits on."""
        try:
            self.live(info)
        except (WorkspaceNotAllowed, ModelNotAllowed):
            return outcome_body(self._answer_beside(info, args, by))
        return self.steer(info, "approve", args, by)

    def operate(self, live: LiveSession, name: str, args: dict[str, Any], by: Actor) -> Outcome:
        """Run a human operation in this worker's runtime of the session."""
        self.allowed.check_args(name, args)
        outcome = live.runtime.control(name, args, surface="api", actor=by)
        live.emit("operation", name=name, by=by.id, is_error=outcome.result.is_error)
        return outcome

    def _prompt(self, live: LiveSession, args: dict[str, Any], by: Actor) -> dict[str, Any]:
        """``prompt`` runs where the session's lock can be taken; its run keeps the lock. While
        the agent works (here, or in the process that holds the lock) a prompt is queued for
        its next safe point (DRV-3); a resume (no prompt) waits a moment for a lock being let
        go, then is :class:`AgentBusy`."""
        resume = args.get("prompt") is None
        with live.guard:
            hold = None if live.working else self.claim(live, wait=CLAIM_S if resume else 0.0)
            if hold is None and resume:
                raise AgentBusy(
                    f"session {live.session}: the agent is working; there is nothing to resume. "
                    "Send a prompt (it is queued) or interrupt it"
                )
            if hold is None:
                queued = outcome_body(self.operate(live, "prompt", args, by))
            else:
                live.handing = hold
                try:
                    return outcome_body(self.operate(live, "prompt", args, by))
                finally:
                    left, live.handing = live.handing, None
                    if left is not None:  # the run did not start: the lock is not its
                        left.release()
        self.kick(live)  # the holder may have let go after its last look
        return queued

    def kick(self, live: LiveSession) -> None:
        """Messages that wait while nobody runs the session start a run here (the lock taken
        now): one queued as a run ended, after its agent last looked. Nothing when the agent
        works here or the lock is held elsewhere (that agent delivers them). Never raises:
        what it could not start waits, queued, for the next prompt."""
        try:
            self._kick(live)
        except ComalError:
            log.exception("web session %s: the queued messages were not run", live.session)

    def _kick(self, live: LiveSession) -> None:
        waiting = queued_messages(self.ledger, live.runtime.need_scope())
        if not waiting:
            return
        with live.guard:
            if live.working:
                return
            hold = self.claim(live)
            if hold is None:
                return
            live.handing = hold
            try:
                live.submit(None, waiting[0].by)
            finally:
                left, live.handing = live.handing, None
                if left is not None:
                    left.release()

    # -- the session's lock --------------------------------------------------------------------
    def claim(self, live: LiveSession, *, wait: float = 0.0) -> Hold | None:
        """Take the session's lock for this worker (trying for up to ``wait`` seconds); None
        when another process holds it. Holding it, this worker knows nobody else runs the
        session: approvals still pending are answered "refused" (their asker is gone), the
        controls set elsewhere are taken up, and the inbox is answered."""
        scope = live.runtime.need_scope()
        deadline = time.monotonic() + wait
        while True:
            try:
                lock = lock_session(self.ledger, scope)
                break
            except SessionLocked:
                if time.monotonic() >= deadline:
                    return None
                time.sleep(POLL_S / 2)
        hold = Hold(self.ledger, scope, lock, lambda command: self._answer(live, command))
        try:
            self._orphans(scope)
            live.runtime.follow_controls(self.allowed.permits)
            hold.drain()
        except BaseException:
            lock.release()
            raise
        return hold

    def _orphans(self, scope: Scope) -> None:
        """Approvals whose asker is gone (this worker holds the lock it would hold) are
        answered "refused": the call is judged afresh when the session resumes."""
        for asked in pending(self.ledger, scope):
            answer(
                self.ledger,
                scope,
                str(asked["id"]),
                granted=False,
                by=GONE,
                reason="the worker that asked is gone (its process stopped); the call is "
                "judged again when the session resumes",
            )

    def _answer(self, live: LiveSession, command: Command) -> dict[str, Any]:
        """A request from the inbox, run here (this worker holds the lock)."""
        try:
            return outcome_body(self.operate(live, command.name, command.args, command.by))
        except ComalError as exc:
            return {"error": {"code": exc.code, "message": str(exc)}}
        except Exception as exc:
            log.exception("web session %s: %s from the inbox failed", live.session, command.name)
            return {"error": {"code": "OPERATION_FAILED", "message": f"{type(exc).__name__}"}}

    def _relay(
        self, live: LiveSession, name: str, args: dict[str, Any], by: Actor
    ) -> dict[str, Any]:
        """Leave the request in the session's inbox and wait for the holder's answer; when
        the lock comes free meanwhile, take it and answer the request here."""
        scope, me = live.runtime.need_scope(), worker_name()
        command = ask(self.ledger, scope, name, args, by, me)
        deadline = time.monotonic() + RELAY_S
        while True:
            state = state_of(self.ledger, scope, command)
            if state is not None and state.get("state") == "done":
                return _answered(dict(state.get("answer") or {}))
            now = time.monotonic()
            if state is None and now > deadline and cancel(self.ledger, scope, command, me):
                raise OwnerNotAnswering(
                    f"session {live.session}: the process that runs it did not take the "
                    f"{name} request within {RELAY_S:g} s (a `comal -p` takes none from the "
                    "web); try again, or wait for it to finish"
                )
            if state is not None and now > deadline + TAKEN_S:
                raise OwnerNotAnswering(
                    f"session {live.session}: the process that runs it took the {name} "
                    f"request but did not answer within {RELAY_S + TAKEN_S:g} s"
                )
            if state is None and self.ledger.session_lock_holder(scope) is None:
                with live.guard:
                    hold = None if live.working else self.claim(live)
                if hold is not None:
                    hold.release()
                    self.kick(live)
                    continue
            time.sleep(POLL_S)

    def _answer_beside(self, info: SessionInfo, args: dict[str, Any], by: Actor) -> Outcome:
        """``approve`` for an agent running in another process: the answer goes to the ledger
        it waits on, through a house built here by the one factory with no host."""
        registry = default_registry()
        registry.add_all(STEERING_OPERATIONS)
        house = house_factory(self.ledger, self.operator(), registry).house(info.scope)
        call = ToolCall(f"api-{uuid.uuid4().hex[:12]}", "approve", json.dumps(args))
        return house.handle(call, by, surface="api")[0]

    # -- reads ---------------------------------------------------------------------------------
    def gauge(self, info: SessionInfo) -> dict[str, Any]:
        """The TUI's status line, from any worker; ``live``: the web may run the session."""
        working = self.working(info)
        try:
            live = self.reader(info)
        except ComalError:
            return {"live": False, "model": info.meta.get("model"), "working": working}
        return {"live": True} | gauge_view(live.runtime, working)

    def asks(self, info: SessionInfo) -> list[dict[str, Any]]:
        """The session's pending approvals; where the web may run the session, each says the
        rule "always" would add (none where the call has no subject to pin one to)."""
        found = pending(self.ledger, info.scope)
        try:
            registry = self.live(info).runtime.registry
        except ComalError:
            registry = None
        for asked in found:
            rule = None
            if registry is not None:
                rule = always_rule(registry, asked["operation"], asked["arguments"])
            asked["always"] = None if rule is None else str(rule)
        return found

    def close(self) -> None:
        """Interrupt every worker thread and give each a moment to stop at its next phase."""
        with self._lock:
            lives = list(self._live.values())
        for live in lives:
            live.interrupt(GONE)
        for live in lives:
            live.join(timeout=5)
            live.runtime.close()


def _answered(answer: dict[str, Any]) -> dict[str, Any]:
    error = answer.get("error")
    if isinstance(error, dict):
        raise Relayed(str(error.get("code") or "OPERATION_FAILED"), str(error.get("message")))
    return answer
