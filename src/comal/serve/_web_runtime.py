"""One web session in one worker of the server: its runtime, and the thread its agent runs in.

A :class:`LiveSession` holds the session's :class:`WebRuntime` (the one factory every surface
builds an agent with) and runs a prompt in a thread of the worker, exactly as the TUI runs it
in its worker. Every worker may hold one for a session; only the worker that holds the
session's lock runs its agent (:mod:`._web_owner`), and hands that lock to ``Runtime.run``.

A worker that does not run the session still answers from the ledger. So a session's controls
live there: what a page set with ``/model``, ``/effort`` and ``/mode`` is the latest ``api``
receipt of that operation (:meth:`WebRuntime.follow_controls`), applied where the operator's
ceiling still allows it, and a session opened in another worker, or after a restart, starts
from the mode, engine and effort it was started with. An "always" rule stays in the runtime
that added it: a run in another worker asks again (the safe side).

A prompt that arrives while the agent works is queued in the ledger (DRV-3, ``prompt_queued``):
the agent that runs the session — here, in another worker, or in another process — delivers it
at its next safe point, and a page shows it as queued until then (``queued``, ``delivered``
events). An interrupt stops the run now, a running command included (DRV-2); the command's
output is told as it comes (``output_delta`` events).

What the page is told goes to the ledger (:class:`~comal.serve._web_events.LiveEvents`). A
worker thread that raises anything at all is recorded (``web_worker_crashed``) and reported;
the server, and every other session, go on. A thread cannot survive what kills its process: a
killed worker drops the session's lock with it, and the next prompt resumes the session from
the ledger as ``comal --resume`` would (RES-1).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..agent import Runtime, Watch
from ..agent._approvals import LedgerApprover
from ..agent._interrupt import Interrupter
from ..agent._queue import Queued, QueueMode, enqueue
from ..agent._steering import always_rule
from ..errors import ComalError, UserError
from ..ops import Actor, HouseFactory, Rule
from ..providers import StreamDone, StreamEvent, TextDelta
from ._web_events import LiveEvents

if TYPE_CHECKING:
    from ._web_owner import Hold

__all__ = ["CONTROLS", "CRASH_EVENT", "AgentBusy", "LiveSession", "WebRuntime"]

log = logging.getLogger("comal.serve")

CRASH_EVENT = "web_worker_crashed"
# The human controls a page sets that live in the runtime's host settings.
CONTROLS = ("model", "effort", "mode")


class AgentBusy(UserError):
    code = "AGENT_BUSY"


class WebRuntime(Runtime):
    """A runtime whose host also steers its loop (:class:`~comal.agent._steering.Steering`):
    the house hands it to the ``prompt`` and ``interrupt`` operations."""

    live: LiveSession | None = None
    _controls_seen: int = 0

    def submit(self, prompt: str | None, by: Actor, *, queue: bool = False) -> dict[str, Any]:
        return self._live().submit(prompt, by, queue=queue)

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

    def follow_controls(self, permits: Callable[[str, str], bool]) -> None:
        """Take up the controls a page set in any worker since this runtime last looked: the
        latest ``api`` receipt of ``model``, ``effort`` and ``mode`` that succeeded, where
        ``permits(name, value)`` (the operator's ceiling now) allows it; and the title."""
        scope = self.need_scope()
        found = self.ledger.records(
            scope, "receipt", kinds=CONTROLS, since_id=self._controls_seen or None
        )
        for record in found:
            self._controls_seen = record.id
            body = record.body
            after = (body.get("observations") or {}).get("after")
            if body.get("surface") != "api" or body.get("status") != "ok":
                continue
            if isinstance(after, str) and permits(record.kind, after):
                setattr(self.host, record.kind, after)
        info = self.ledger.session(scope)
        if info is not None and info.title:
            self.host.name = info.title


class LiveSession:
    """One session's runtime in this worker and, while this worker runs it, its agent's
    thread. ``guard`` keeps this worker's own requests for the session from racing."""

    def __init__(self, runtime: WebRuntime, tenant: str) -> None:
        self.runtime = runtime
        runtime.live = self
        self.tenant = tenant
        self.session = runtime.need_scope().session
        self.guard = threading.RLock()
        self.events = LiveEvents(runtime.ledger, runtime.need_scope())
        self._start = threading.Lock()
        self._running = False
        self._stop = Interrupter(self.session)
        self._thread: threading.Thread | None = None
        self.crashed: dict[str, str] | None = None
        # The first prompt is stored with the session (one transaction): its run answers it.
        self.started_with: str | None = None
        # The session's lock, taken for the prompt being submitted: its run takes it over.
        self.handing: Hold | None = None
        # Run once a run has ended and the lock is let go: a message that came in as it
        # ended starts the next one (set by the server's sessions).
        self.after: Callable[[], None] | None = None

    def emit(self, kind: str, **data: Any) -> None:
        self.events.emit(kind, **data)

    @property
    def working(self) -> bool:
        """Whether this worker runs the session's agent now (it holds the lock for it)."""
        return self._running

    # -- steering (the operations' host) -------------------------------------------------------
    def submit(self, prompt: str | None, by: Actor, *, queue: bool = False) -> dict[str, Any]:
        """Run ``prompt`` under the lock handed over (``handing``); while the agent works —
        here or in another process — queue it for the agent's next safe point instead."""
        with self._start:
            if self._running or self.handing is None:
                return self._queue(prompt, by, queue)
            hold, self.handing = self.handing, None
            self._stop.clear()
            self._running = True
            self._thread = threading.Thread(
                target=self._work, args=(prompt, by, hold), name=f"comal-web-{self.session[:8]}"
            )
            self._thread.daemon = True
            self._thread.start()
        return {"session": self.session, "working": True}

    def _queue(self, prompt: str | None, by: Actor, queue: bool) -> dict[str, Any]:
        if prompt is None:
            raise AgentBusy(
                f"session {self.session}: the agent is working; there is nothing to resume. "
                "Send a prompt (it is queued) or interrupt it"
            )
        rt = self.runtime
        mode: QueueMode = "queue" if queue else "steer"
        queued = enqueue(rt.ledger, rt.need_scope(), prompt, mode=mode, by=by, channel="web")
        self.emit("queued", **_queued(queued))
        return {"session": self.session, "working": True, "queued": queued.id, "mode": mode}

    def interrupt(self, by: Actor) -> bool:
        if not self.working:
            return False
        self._stop.request(f"the {by.kind} {by.id}")
        self.emit("interrupting", by=by.id)
        return True

    def join(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # -- the worker ----------------------------------------------------------------------------
    def _work(self, prompt: str | None, by: Actor, hold: Hold) -> None:
        """The run, under the lock ``hold`` took; other workers' requests are answered while it
        runs, and once more before the lock is let go. "stopped" is said after that, so a
        page that reacts to it finds the session free."""
        stopped: dict[str, Any] | None = None
        try:
            hold.watch(tick=lambda: self.events.flush(due_only=True))
            stopped = self._run(prompt, by, hold)
        except BaseException as exc:
            self._crash(exc)
        finally:
            try:
                hold.release()
            finally:
                self._running = False
                self.events.flush()
                if stopped is not None:
                    self.emit("stopped", **stopped)
        if self.after is not None and _goes_on(stopped):
            try:
                self.after()
            except Exception:  # the next prompt delivers what waits
                log.exception("web session %s: the queued messages were not run", self.session)

    def _run(self, prompt: str | None, by: Actor, hold: Hold) -> dict[str, Any]:
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
                held=hold.lock,
                watch=Watch(self._stop, self._output, self._delivered),
            )
        except ComalError as exc:
            return {"status": "error", "answer": None, "error": _coded(exc)}
        answered = result.answer if result.status == "finished" else None
        return {"status": result.status, "answer": answered, "error": result.error}

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

    def _output(self, call_id: str, stream: str, text: str) -> None:
        self.emit("output_delta", call_id=call_id, stream=stream, text=text)

    def _delivered(self, queued: Queued) -> None:
        self.emit("delivered", **_queued(queued))

    def _phase(self, phase: str, detail: str) -> None:
        if phase == "delegated":
            self.emit("child_started", child=detail)
        self._stop.probe(phase, detail)

    def house_phase(self, phase: str, call_id: str) -> None:
        if phase == "judged":
            self.emit("judged", call_id=call_id)
        elif phase == "executed":
            self.emit("executed", call_id=call_id)


def _goes_on(stopped: dict[str, Any] | None) -> bool:
    """Whether messages still queued after a run start the next one: not after a crash or a
    run that failed (its next run could fail the same way before delivering them)."""
    if stopped is None:
        return False
    error = stopped.get("error") or {}
    return stopped.get("status") != "error" or error.get("code") == "INTERRUPTED"


def _queued(queued: Queued) -> dict[str, Any]:
    return {"queued": queued.id, "prompt": queued.prompt, "mode": queued.mode, "by": queued.by.id}


def _coded(exc: ComalError) -> dict[str, str]:
    return {"code": exc.code, "message": str(exc)}
