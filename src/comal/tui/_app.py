"""The interactive TUI: a transcript, a status line, tool approval dialogs, slash commands.

Everything goes through the session's :class:`~comal.agent.Runtime` (the one agent factory):
the agent runs in a worker thread and talks to the screen only through ``call_from_thread``;
approvals block that worker until the human answers the dialog and are recorded by the house
with the human actor (OPS-2); slash commands are the registry's human operations on surface
"tui" (``/context``, ``/state``, ``/compact``, ``/model``, ``/effort``, ``/mode``, ``/name``),
judged and receipted like any other (OPS-1). Text from the model or a tool is shown with its
control and bidi characters escaped (:func:`comal.safe_text.safe`).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text as RichText
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Collapsible, Footer, Input, Static

from ..agent import Runtime, context_report, render_report
from ..errors import ComalError
from ..ledger import Entry
from ..ops import Actor, ApprovalRequest, CallbackApprover, Rule
from ..safe_text import safe, safe_command

__all__ = ["ApprovalScreen", "ComalApp"]

# Approval answers: allow this call, allow calls like it for the rest of the session, deny.
ONCE, ALWAYS, DENY = "once", "always", "deny"
_OUTPUT_PREVIEW = 4_000


class ApprovalScreen(ModalScreen[str]):
    """Allow once (y), always for this session (a), or deny (n) one proposed call."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", f"answer('{ONCE}')", "allow once"),
        Binding("a", f"answer('{ALWAYS}')", "always allow"),
        Binding("n", f"answer('{DENY}')", "deny"),
    ]
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    #dialog { width: 80%; height: auto; border: thick $warning; padding: 1 2; background: $panel; }
    #buttons { height: auto; margin-top: 1; }
    """

    def __init__(self, request: ApprovalRequest, always: Rule | None) -> None:
        super().__init__()
        self.request = request
        self.always = always

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Approve this call?", id="title")
            # Exactly what will run, with anything a terminal would act on shown escaped.
            yield Static(safe_command(self.request.describe()), id="request", markup=False)
            if self.always is not None:
                # The rule holds the call's subject (a path, a command): the model's text.
                rule = safe(str(self.always))
                yield Static(f"always: adds the rule allow {rule}", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Allow once (y)", id=ONCE, variant="success")
                if self.always is not None:
                    yield Button("Always (a)", id=ALWAYS, variant="primary")
                yield Button("Deny (n)", id=DENY, variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or DENY)

    def action_answer(self, answer: str) -> None:
        if answer == ALWAYS and self.always is None:
            return
        self.dismiss(answer)


class ComalApp(App[None]):
    """``comal`` without ``-p``: chat with the agent of one session."""

    TITLE = "comal"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+q", "quit", "quit")]
    DEFAULT_CSS = """
    #transcript { height: 1fr; border: round $primary; }
    #transcript > Static { margin: 0 1; }
    #status { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, runtime: Runtime) -> None:
        super().__init__()
        self.runtime = runtime
        self.busy = False
        self.turn_note = ""
        # Approvals the worker waits on; answered "deny" if the app closes first.
        self._waiting: set[threading.Event] = set()

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield VerticalScroll(id="transcript")
        yield Static("", id="status")
        yield Input(placeholder="Ask, or /help")
        yield Footer()

    def on_mount(self) -> None:
        rt = self.runtime
        if rt.scope is None:
            self.note("new session: the first prompt starts it")
        else:
            info = rt.ledger.session(rt.scope)
            self.note(f"session {rt.scope.session} ({info.status if info else '?'})")
            for entry in rt.ledger.tail(rt.scope, n=10):
                self.show_entry(entry)
        self.refresh_status()
        self.query_one(Input).focus()

    # -- the transcript -----------------------------------------------------------------------
    def write(self, text: str, *, classes: str = "") -> None:
        box = self.query_one("#transcript", VerticalScroll)
        box.mount(Static(RichText(safe(text)), classes=classes))
        box.scroll_end(animate=False)

    def note(self, text: str) -> None:
        self.write(f"· {text}", classes="note")

    def show_output(self, title: str, text: str) -> None:
        """A tool's output, collapsed: its title says what it is; expand to read it."""
        shown = text if len(text) <= _OUTPUT_PREVIEW else text[:_OUTPUT_PREVIEW] + "\n…"
        box = self.query_one("#transcript", VerticalScroll)
        box.mount(
            Collapsible(Static(RichText(safe(shown))), title=safe(title)[:120], collapsed=True)
        )
        box.scroll_end(animate=False)

    def show_entry(self, entry: Entry) -> None:
        message = entry.message
        result = message.tool_result
        if result is not None:
            lines = result.text.count("\n") + 1
            self.show_output(f"{result.name or 'tool'} output ({lines} lines)", result.text)
            return
        if message.text:
            self.write(f"{entry.role}: {message.text[:_OUTPUT_PREVIEW]}")
        for call in message.tool_calls:
            self.write(f"→ {call.name} {call.arguments[:300]}", classes="call")

    def on_unmount(self) -> None:
        # Closing with a dialog open answers it "deny", so the worker thread can end.
        for event in list(self._waiting):
            event.set()

    # -- status line --------------------------------------------------------------------------
    def status_text(self) -> str:
        rt = self.runtime
        state = "working…" if self.busy else "ready"
        model = rt.spec or "model ?"
        if rt.scope is None:
            return f"new session · {model} · {state}"
        try:
            # The same function /context runs, without a receipt per refresh.
            report = context_report(rt, rt.proposer().preview())
        except ComalError as exc:
            return f"[{exc.code}] · {model} · {state}"
        mark = "" if report["measured"] else " ~"
        return (
            f"ctx {report['utilization']:.0%}{mark} · {report['input']:,}/{report['window']:,} "
            f"tokens · {report['engine']} · {model} · {state}{board_note(rt)}{self.turn_note}"
        )

    def refresh_status(self) -> None:
        self.query_one("#status", Static).update(RichText(safe(self.status_text())))

    # -- input --------------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if text.startswith("/"):
            self.slash(text)
            return
        if self.busy:
            self.note("the agent is working; wait for its answer")
            return
        self.write(f"you: {text}")
        self.busy = True
        self.refresh_status()
        self.run_agent(text)

    @work(thread=True, exclusive=True)
    def run_agent(self, prompt: str) -> None:
        approver = CallbackApprover(self._ask_human, by=Actor.user(self.runtime.user))
        try:
            result = self.runtime.run(prompt, approver=approver, say=self._say)
            line = result.answer or f"(stopped: {result.status})"
            if result.error:
                line += f" [{result.error['code']}] {result.error['message']}"
        except ComalError as exc:
            line = f"[{exc.code}] {exc}"
        self.call_from_thread(self._finished, line)

    def _finished(self, line: str) -> None:
        self.write(f"comal: {line}")
        self.busy = False
        self.turn_note = ""
        self.refresh_status()

    def _say(self, kind: str, text: str) -> None:
        self.call_from_thread(self._said, kind, text)

    def _said(self, kind: str, text: str) -> None:
        if kind == "turn":
            self.turn_note = f" · {text}"
            self.refresh_status()  # the status bar follows each turn
        elif kind == "result" and self.runtime.scope is not None:
            tail = self.runtime.ledger.tail(self.runtime.scope, n=1)
            if tail and tail[0].message.tool_result is not None:
                self.show_entry(tail[0])
            self.note(text)
        else:
            self.note(f"{kind}: {text}")

    def _always_rule(self, request: ApprovalRequest) -> Rule | None:
        """The rule "always" would add: this operation on this exact subject, or none when
        the operation has no subject to pin it to (always-allow-everything is not offered)."""
        op = self.runtime.registry.get(request.operation)
        if op is None or op.subject is None:
            return None
        try:
            subject = op.subject(op.input.model_validate(dict(request.arguments)))
        except ValueError:
            return None
        if not subject or (op.subject_kind == "path" and any(c in subject for c in "*?[")):
            return None
        return Rule(op.name, _literal(subject), "allow")

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
            if name == "help":
                self.help()
            elif name in ("context", "state", "compact"):
                self.human(name, {})
            elif name in ("model", "effort", "mode", "name"):
                if not value:
                    self.note(f"/{name} needs a value, e.g. /{name} {_EXAMPLE[name]}")
                else:
                    self.human(name, {name: value})
            else:
                self.note(f"unknown command /{name}; /help lists them")
        except ComalError as exc:
            self.note(f"[{exc.code}] {exc}")
        self.refresh_status()

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
            box = self.query_one("#transcript", VerticalScroll)
            box.mount(Static(table))
            box.scroll_end(animate=False)
        else:
            self.write(outcome.result.text)

    def help(self) -> None:
        lines = ["commands:"]
        for slash, op_name in sorted(self.runtime.registry.slash_commands().items()):
            op = self.runtime.registry.get(op_name)
            if op is not None and op.audience == "human":
                lines.append(f"  {slash:<10} {op.description}")
        lines.append("  /help      this list")
        self.write("\n".join(lines))


def board_note(rt: Runtime) -> str:
    """The board in the status line (BRD-2): how many items are verified, done, open; /state
    shows it whole."""
    from ..work import board_of

    if rt.scope is None:
        return ""
    board = board_of(rt.ledger, rt.scope)
    if not board.items:
        return ""
    counts = board.counts
    done = counts.get("done", 0)
    left = len(board.open_items)
    return (
        f" · board {counts.get('verified', 0)}/{len(board.items)} verified"
        + (f", {done} done" if done else "")
        + (f", {left} open" if left else "")
    )


def _literal(subject: str) -> str:
    """``subject`` as a rule pattern that matches only itself (glob characters escaped)."""
    out = []
    for ch in subject:
        out.append(f"[{ch}]" if ch in "*?[" else ch)
    return "".join(out)


_EXAMPLE = {"model": "anthropic:claude-sonnet-4-6", "effort": "high", "mode": "ask", "name": "x"}
