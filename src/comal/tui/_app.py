"""The interactive TUI: a transcript, a status line, tool approval dialogs, slash commands.

Everything goes through the session's :class:`~comal.agent.Runtime` (the one agent factory):
the agent runs in a worker thread and talks to the screen only through ``call_from_thread``;
approvals block that worker until the human answers the dialog (a Write or Edit shows the diff
it would make, a shell call its command) and are recorded by the house with the human actor
(OPS-2); slash commands are the registry's human operations on surface "tui" (``/context``,
``/state``, ``/compact``, ``/cost``, ``/model``, ``/effort``, ``/mode``, ``/name``), judged and
receipted like any other (OPS-1). ``/clear`` and ``/resume`` open another session through the
same factory (:meth:`~comal.agent.Runtime.reopen`); ``/model`` alone picks from the model
catalog, ``/resume`` alone from the sessions one may continue. The transcript shows what the
person and the model said and what the model did, each once (:mod:`._transcript`), the model's
text as it streams, a running command's output as it comes; text from the model or a tool is
shown with its control and bidi characters escaped (:func:`comal.safe_text.safe`).

While the agent works, Escape stops it now (a running command is killed, DRV-2), Enter sends a
message that goes in at its next safe point (steer) and Tab one that waits for its run to
finish (queue): both are queued in the ledger (DRV-3, :mod:`comal.agent._queue`), shown under
the transcript as queued until the agent takes them, the same mechanism as the web page's.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text as RichText
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Footer, Input, Static

from ..agent import Runtime, Watch, render_report, resumable
from ..agent._interrupt import Interrupter
from ..agent._liveness import liveness
from ..agent._queue import Queued, QueueMode, enqueue, pending
from ..agent._steering import always_rule
from ..errors import ComalError
from ..messages import open_calls
from ..ops import Actor, ApprovalRequest, CallbackApprover, Rule
from ..providers import StreamDone, StreamEvent, TextDelta, catalog_specs
from ..safe_text import safe
from ._memory import tui_memory
from ._screens import ALWAYS, DENY, ONCE, ApprovalScreen, PickerScreen
from ._status import control_now, status_line
from ._transcript import (
    LIVE_TAIL,
    call_line,
    entry_widgets,
    live_output,
    live_text,
    note,
    output_widget,
    said,
)

__all__ = ["ApprovalScreen", "ComalApp"]

# How much of a continued session the transcript shows when it opens.
_RESUME_TAIL = 12
# The TUI's own commands, beside the registry's human operations.
_OWN = {
    "/clear": "Start a new session (this one stays in the ledger).",
    "/resume": "Continue another session: pick one, or /resume ID.",
    "/exit": "Leave comal (ctrl+q).",
    "/help": "This list.",
    "# TEXT": "Remember TEXT for this agent (a note every session of it can recall).",
    "/memory": "This agent's memories, newest first; /memory WORDS searches them.",
    "/forget": "Forget a memory: /forget ID [why].",
}


class ComalApp(App[None]):
    """``comal`` without ``-p``: chat with the agent of one session."""

    TITLE = "comal"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "quit"),
        Binding("escape", "interrupt", "interrupt"),
        # Only while the agent works and something is typed (check_action): else Tab moves on.
        Binding("tab", "queue", "queue for after the run", priority=True, show=False),
    ]
    DEFAULT_CSS = """
    #transcript { height: 1fr; border: round $primary; }
    #transcript > Static { margin: 0 1; }
    #queued { height: auto; max-height: 8; padding: 0 1; }
    #status { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self.runtime = runtime
        self.busy = False
        self.turn_note = ""
        self._turns = 0  # model calls of the prompt being worked on
        # Approvals the worker waits on; answered "deny" if the app closes first.
        self._waiting: set[threading.Event] = set()
        # Escape stops the run at its next safe phase (the web page's interrupt, the same way).
        self._interrupter = Interrupter()
        # The model's reply as it streams, and the last one streamed whole (not said twice).
        self._stream: Static | None = None
        self._stream_text = ""
        self._streamed = ""
        self._last_call = ""
        self._tools: dict[str, str] = {}
        # A running call's output as it comes (its widget and text), and the queued messages.
        self._live: tuple[Static, str] | None = None
        self._queued: dict[str, Static] = {}
        # Runtimes /clear and /resume opened: this app closes them (its caller, the first).
        self._opened: list[Runtime] = []

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="transcript")
        yield Vertical(id="queued")
        yield Static("", id="status")
        yield Input(placeholder="Ask, # to remember, or /help")
        yield Footer()

    def on_mount(self) -> None:
        self.show_session()
        self.refresh_status()
        self.query_one(Input).focus()

    def show_session(self) -> None:
        rt = self.runtime
        if rt.scope is None:
            self.note("new session: the first prompt starts it")
            return
        info = rt.ledger.session(rt.scope)
        title = f" · {info.title}" if info is not None and info.title else ""
        # What `comal sessions` says of it (crashed, interrupted…), not the stored column.
        state = liveness(rt.ledger, info) if info is not None else "?"
        self.note(f"session {rt.scope.session} ({state}){title}")
        tail = rt.ledger.tail(rt.scope, n=_RESUME_TAIL)
        for entry in tail:
            self.show(*entry_widgets(entry, self._tools))
        waiting = open_calls(e.message for e in tail)
        if waiting:
            names = ", ".join(f"{c.name} {c.id}" for c in waiting)
            self.note(
                f"{names}: no result (the session stopped while it ran); the next prompt "
                "settles it first, and a call whose outcome is unknown is not run again unasked"
            )
        for queued in pending(rt.ledger, rt.scope):
            self._show_queued(queued)

    # -- the transcript -----------------------------------------------------------------------
    def show(self, *widgets: Widget) -> None:
        box = self.query_one("#transcript", VerticalScroll)
        box.mount_all(widgets)
        box.scroll_end(animate=False)

    def write(self, text: str, *, classes: str = "") -> None:
        self.show(Static(RichText(safe(text)), classes=classes))

    def note(self, text: str) -> None:
        self.show(note(text))

    def on_unmount(self) -> None:
        # Closing with a dialog open answers it "deny", so the worker thread can end.
        for event in list(self._waiting):
            event.set()
        for runtime in self._opened:
            runtime.close()

    # -- status line --------------------------------------------------------------------------
    def status_text(self) -> str:
        return status_line(self.runtime, busy=self.busy, turn_note=self.turn_note)

    def refresh_status(self) -> None:
        self.query_one("#status", Static).update(RichText(safe(self.status_text())))

    # -- input --------------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith(("/", "#")):  # "#": a note for the agent's memory, never sent (DRV-7)
            self.slash(text)
            return
        if self.busy:
            self.queue(text, "steer")
            return
        self.show(said("you", text))
        self.start(text)

    def start(self, prompt: str | None) -> None:
        self.busy = True
        self._streamed, self._turns = "", 0
        self.refresh_status()
        self.run_agent(prompt)

    # -- messages sent while the agent works (DRV-3) ------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "queue":
            typed = self.query_one(Input).value.strip()
            return self.busy and bool(typed) and self.screen is self.screen_stack[0]
        return True

    def action_queue(self) -> None:
        box = self.query_one(Input)
        text, box.value = box.value.strip(), ""
        if text.startswith("#"):  # a note is never a message, queued or not (DRV-7)
            self.slash(text)
        elif text:
            self.queue(text, "queue")

    def queue(self, text: str, mode: QueueMode) -> None:
        """Record ``text`` for the running agent (:func:`comal.agent._queue.enqueue`)."""
        rt = self.runtime
        if rt.scope is None or text.startswith("/"):
            self.note("the agent is working: commands wait for its answer")
            return
        by = Actor.user(rt.user)
        self._show_queued(enqueue(rt.ledger, rt.scope, text, mode=mode, by=by, channel="tui"))

    def _show_queued(self, queued: Queued) -> None:
        when = "after the running call" if queued.mode == "steer" else "after this run"
        shown = said(f"queued ({when})", queued.prompt, classes="queued")
        self._queued[queued.id] = shown
        self.query_one("#queued", Vertical).mount(shown)

    def _delivered(self, queued: Queued) -> None:
        shown = self._queued.pop(queued.id, None)
        if shown is not None:
            shown.remove()
        self._end_stream()
        self.show(said("you", queued.prompt))

    @work(thread=True, exclusive=True)
    def run_agent(self, prompt: str | None) -> None:
        approver = CallbackApprover(self._ask_human, by=Actor.user(self.runtime.user))
        answer, problem = "", ""
        self._interrupter.clear()
        watch = Watch(
            self._interrupter,
            lambda call_id, stream, text: self.call_from_thread(self._output, stream, text),
            lambda queued: self.call_from_thread(self._delivered, queued),
        )
        try:
            result = self.runtime.run(
                prompt,
                approver=approver,
                say=self._say,
                on_event=self._on_event,
                probe=self._interrupter.probe,
                watch=watch,
            )
            # Only a finished run's answer is this prompt's: otherwise it is an older one.
            answer = result.answer or "" if result.status == "finished" else ""
            if not answer:
                problem = f"stopped: {result.status}"
            if result.error:
                problem = f"[{result.error['code']}] {result.error['message']}"
            # Another run for what came in as this one ended, unless it failed (the next
            # could fail the same way before taking them).
            code = (result.error or {}).get("code")
            again = result.status != "error" or code == "INTERRUPTED"
        except ComalError as exc:
            problem, again = f"[{exc.code}] {exc}", False
        self.call_from_thread(self._finished, answer, problem, again)

    def action_interrupt(self) -> None:
        if not self.busy or self._interrupter.is_set():
            return
        self._interrupter.request(f"the user {self.runtime.user}")
        self.note("interrupting: the agent stops now")

    def _finished(self, answer: str, problem: str, again: bool = False) -> None:
        self._end_stream()
        if answer and answer.strip() != self._streamed.strip():
            self.show(said("comal", answer))  # not streamed (or not as it ended)
        if problem:
            self.note(problem)
        self.busy = False
        self.turn_note = ""
        self.refresh_status()
        rt = self.runtime
        if again and rt.scope is not None and pending(rt.ledger, rt.scope):
            self.start(None)

    # -- what the agent says while it works (from its thread) ---------------------------------
    def _on_event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.call_from_thread(self._delta, event.text)
        elif isinstance(event, StreamDone):
            self.call_from_thread(self._end_stream)

    def _delta(self, text: str) -> None:
        self._stream_text += text
        shown = RichText(safe(f"comal: {self._stream_text}"))
        if self._stream is None:
            self._stream = Static(shown)
            self.show(self._stream)
        else:
            self._stream.update(shown)
            self.query_one("#transcript", VerticalScroll).scroll_end(animate=False)

    def _end_stream(self) -> None:
        if self._stream is not None:
            self._streamed = self._stream_text
        self._stream, self._stream_text = None, ""

    def _output(self, stream: str, text: str) -> None:
        """A running call's output as it comes, under its call, until its result replaces it."""
        shown = text if stream == "stdout" else f"[stderr] {text}"
        if self._live is None:
            widget = live_output(shown)
            self._live = (widget, shown)
            self.show(widget)
            return
        widget, before = self._live
        now = (before + shown)[-2 * LIVE_TAIL :]  # only the tail is ever shown
        self._live = (widget, now)
        widget.update(live_text(now))
        self.query_one("#transcript", VerticalScroll).scroll_end(animate=False)

    def _say(self, kind: str, text: str) -> None:
        self.call_from_thread(self._said, kind, text)

    def _said(self, kind: str, text: str) -> None:
        self._end_stream()
        if kind == "turn":
            # The turn's own words repeat the gauge and the model the line already shows.
            self._turns += 1
            self.turn_note = f" turn {self._turns}"
            self.refresh_status()  # the status bar follows each turn
        elif kind == "call":
            name, _, arguments = text.partition(" ")
            self._last_call = name
            self.show(call_line(name, arguments))
        elif kind == "output":
            if self._live is not None:
                self._live[0].remove()  # the result, as kept, replaces the live view
                self._live = None
            self.show(output_widget(self._last_call, text))
        elif kind == "result":
            self.note(text)
        else:
            self.note(f"{kind}: {text}")

    def _always_rule(self, request: ApprovalRequest) -> Rule | None:
        """The rule "always" would add (:func:`comal.agent._steering.always_rule`)."""
        return always_rule(self.runtime.registry, request.operation, request.arguments)

    def _ask_human(self, request: ApprovalRequest) -> bool:
        """Runs in the worker: show the dialog on the UI thread and wait for the answer."""
        answered = threading.Event()
        box: dict[str, str] = {}
        always = self._always_rule(request)

        def done(answer: str | None) -> None:
            box["answer"] = answer or DENY
            answered.set()

        self._waiting.add(answered)
        try:
            self.call_from_thread(self.push_screen, ApprovalScreen(request, always), done)
            answered.wait()
        finally:
            self._waiting.discard(answered)
        answer = box.get("answer", DENY)
        if answer == ALWAYS and always is not None:
            self.runtime.add_rule(always, by=Actor.user(self.runtime.user))
        return answer in (ONCE, ALWAYS)

    # -- slash commands -----------------------------------------------------------------------
    def slash(self, text: str) -> None:
        name, _, arg = text[1:].partition(" ")
        value = arg.strip()
        try:
            if text.startswith("#"):  # tui/_memory.py, as the memory commands below
                self.write(tui_memory(self.runtime, "remember", text))
            elif name == "help":
                self.help()
            elif name in ("exit", "quit"):
                self.exit()
            elif name == "clear":
                self.switch(None)
            elif name == "resume" and value:
                self.switch(value)
            elif name == "resume":
                self.pick_session()
            elif name == "model" and not value:
                self.pick_model()
            elif name in ("context", "state", "compact", "cost"):
                self.human(name, {})
            elif name in ("model", "effort", "mode", "name"):
                self.control(name, value)
            elif name in ("memory", "forget"):
                self.write(tui_memory(self.runtime, name, value))
            else:
                self.note(f"unknown command /{name}; /help lists them")
        except ComalError as exc:
            self.note(f"[{exc.code}] {exc}")
        self.refresh_status()

    def control(self, name: str, value: str) -> None:
        if not value:
            self.note(control_now(self.runtime, name))
            return
        if name == "model":
            self.runtime.check_model(value)  # a coded error now, not at the next prompt
        self.human(name, {name: value})

    def human(self, name: str, args: dict[str, Any]) -> None:
        rt = self.runtime
        if rt.scope is None:
            self.note(f"/{name}: the session starts with its first prompt")
            return
        outcome = rt.control(name, args, surface="tui")
        report = outcome.receipt.observations.get("report")
        if name == "context" and isinstance(report, dict) and not outcome.result.is_error:
            table = Table("", "", title="context", show_header=False)
            for label, shown in render_report(report):
                table.add_row(label, safe(shown))
            self.show(Static(table))
        else:
            self.write(outcome.result.text)

    def switch(self, resume: str | None) -> None:
        """``/clear`` (``None``) or ``/resume ID``: this app on another session."""
        if self.busy:
            self.note("the agent is working; wait for its answer, then switch")
            return
        runtime = self.runtime.reopen(resume)
        self._opened.append(runtime)
        self.runtime = runtime
        self.turn_note, self._tools = "", {}
        self.query_one("#transcript", VerticalScroll).remove_children()
        self.show_session()
        self.refresh_status()

    def pick_session(self) -> None:
        rt = self.runtime
        choices = []
        for info in resumable(rt.ledger, rt.config.tenant, rt.config.agent)[:50]:
            when = info.created_at[:16].replace("T", " ")
            title = (info.title or info.source or "")[:60]
            state = liveness(rt.ledger, info)
            label = f"{info.id[:8]}  {when}  {state:<11} {info.entries:>5} entries  {title}"
            choices.append((info.id, label))
        if not choices:
            self.note("no other session to continue")
            return
        current = rt.scope.session if rt.scope is not None else None
        self.push_screen(PickerScreen("continue a session", choices, current), self._picked_session)

    def _picked_session(self, chosen: str | None) -> None:
        if chosen is not None and (
            self.runtime.scope is None or chosen != self.runtime.scope.session
        ):
            try:
                self.switch(chosen)
            except ComalError as exc:
                self.note(f"[{exc.code}] {exc}")

    def pick_model(self) -> None:
        current = self.runtime.spec
        specs = catalog_specs()
        if current and current not in specs:
            specs.insert(0, current)
        choices = [(s, f"{s}  (now)" if s == current else s) for s in specs]
        self.push_screen(
            PickerScreen("model for the next turns", choices, current), self._picked_model
        )

    def _picked_model(self, chosen: str | None) -> None:
        if chosen is None or chosen == self.runtime.spec:
            return
        self.slash(f"/model {chosen}")

    def help(self) -> None:
        lines = ["commands:"]
        for slash, op_name in sorted(self.runtime.registry.slash_commands().items()):
            op = self.runtime.registry.get(op_name)
            if op is not None and op.audience == "human":
                lines.append(f"  {slash:<10} {op.description}")
        lines += [f"  {slash:<10} {what}" for slash, what in _OWN.items()]
        self.write("\n".join(lines))
