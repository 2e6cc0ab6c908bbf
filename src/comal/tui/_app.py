"""The interactive TUI: a transcript, a status line, tool approval dialogs, slash commands.

The agent runs in a worker thread; it talks to the screen only through ``call_from_thread``.
Approvals block that worker until the human answers the dialog, and are recorded by the house
with the human actor (OPS-2). Slash commands are the registry's human surface (OPS-1):
``/model`` and ``/effort`` run through the same judge as any other operation, on surface "tui".
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, RichLog, Static

from ..agent import Agent
from ..context import (
    EngineConfig,
    View,
    budget_report,
    compact,
    render_state,
    store_checkpoint,
    work_state,
)
from ..errors import ComalError
from ..ledger import LedgerBackend, Scope
from ..messages import ToolCall
from ..ops import Actor, ApprovalRequest, Approver, CallbackApprover, House
from ..tokens import Budget, resolve_window

__all__ = ["AgentFactory", "ApprovalScreen", "ComalApp", "TuiSession"]

# (approver, say) -> an Agent for the session, built fresh for each prompt so that /model and
# /mode changes apply to the next turn.
AgentFactory = Callable[[Approver, Callable[[str, str], None]], Agent]


@dataclass
class TuiSession:
    ledger: LedgerBackend
    scope: Scope
    house: House
    make_agent: AgentFactory
    model: str | None = None
    context_window: int | None = None
    user: str = "user"


class ApprovalScreen(ModalScreen[bool]):
    """Allow or deny one proposed call (y / n)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "allow"),
        Binding("n", "answer(False)", "deny"),
    ]
    DEFAULT_CSS = """
    ApprovalScreen { align: center middle; }
    #dialog { width: 80%; height: auto; border: thick $warning; padding: 1 2; background: $panel; }
    #buttons { height: auto; margin-top: 1; }
    """

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Approve this call?", id="title")
            yield Static(self.request.describe(), id="request", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Allow (y)", id="allow", variant="success")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "allow")

    def action_answer(self, allowed: bool) -> None:
        self.dismiss(allowed)


class ComalApp(App[None]):
    """``comal`` without ``-p``: chat with the agent of one session."""

    TITLE = "comal"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+q", "quit", "quit")]
    DEFAULT_CSS = """
    #transcript { height: 1fr; border: round $primary; }
    #status { height: 1; padding: 0 1; background: $boost; }
    """

    def __init__(self, session: TuiSession) -> None:
        super().__init__()
        self.session = session
        self.busy = False
        self.agent: Agent | None = None

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield RichLog(id="transcript", wrap=True, markup=False, highlight=False)
        yield Static("", id="status")
        yield Input(placeholder="Ask, or /context /state /compact /model NAME /effort LEVEL")
        yield Footer()

    def on_mount(self) -> None:
        log = self.query_one(RichLog)
        info = self.session.ledger.session(self.session.scope)
        log.write(f"session {self.session.scope.session} ({info.status if info else '?'})")
        for entry in self.session.ledger.tail(self.session.scope, n=10):
            log.write(f"{entry.role}: {entry.message.text[:300]}")
        self.refresh_status()
        self.query_one(Input).focus()

    # -- status line --------------------------------------------------------------------------
    def status_text(self) -> str:
        s = self.session
        report = budget_report(s.ledger, s.scope, model=s.model, window=s.context_window)
        mark = "" if report["measured"] else " ~"
        state = "working…" if self.busy else "ready"
        return (
            f"ctx {report['utilization']:.0%}{mark} · {report['input']:,}/{report['window']:,} "
            f"tokens · {report['model'] or 'model ?'} · {state}"
        )

    def refresh_status(self) -> None:
        self.query_one("#status", Static).update(self.status_text())

    # -- input --------------------------------------------------------------------------------
    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        log = self.query_one(RichLog)
        if text.startswith("/"):
            self.slash(text)
            return
        if self.busy:
            log.write("(the agent is working; wait for its answer)")
            return
        log.write(f"you: {text}")
        self.busy = True
        self.refresh_status()
        self.run_agent(text)

    @work(thread=True, exclusive=True)
    def run_agent(self, prompt: str) -> None:
        approver = CallbackApprover(self._ask_human, by=Actor.user(self.session.user))
        try:
            agent = self.session.make_agent(approver, self._say)
            self.agent = agent
            result = agent.run(prompt)
            line = result.answer or f"(stopped: {result.status})"
            if result.error:
                line += f" [{result.error['code']}] {result.error['message']}"
        except ComalError as exc:
            line = f"[{exc.code}] {exc}"
        self.call_from_thread(self._finished, line)

    def _finished(self, line: str) -> None:
        self.query_one(RichLog).write(f"comal: {line}")
        self.busy = False
        self.agent = None
        self.refresh_status()

    def _say(self, kind: str, text: str) -> None:
        self.call_from_thread(self.query_one(RichLog).write, f"  · {kind}: {text}")

    def _ask_human(self, request: ApprovalRequest) -> bool:
        """Runs in the worker: show the dialog on the UI thread and wait for the answer."""
        answered = threading.Event()
        box: dict[str, bool] = {}

        def done(allowed: bool | None) -> None:
            box["allowed"] = bool(allowed)
            answered.set()

        self.call_from_thread(self.push_screen, ApprovalScreen(request), done)
        answered.wait()
        return box["allowed"]

    # -- slash commands -----------------------------------------------------------------------
    def slash(self, text: str) -> None:
        log = self.query_one(RichLog)
        name, _, arg = text[1:].partition(" ")
        s = self.session
        try:
            if name == "context":
                r = budget_report(s.ledger, s.scope, model=s.model, window=s.context_window)
                if s.ledger.summary_frontier(s.scope):  # the dag engine's state, as comal context
                    from ..compaction import dag_report

                    bud = Budget.for_window(r["window"], system_tokens=0, tools_tokens=0)
                    r["dag"] = dag_report(s.ledger, s.scope, bud)
                log.write(json.dumps(r, ensure_ascii=False, indent=1))
            elif name == "state":
                config = EngineConfig(counter=s.ledger.counter)
                view = View.from_ledger(s.ledger, s.scope)
                log.write(render_state(work_state(view, config), config.token_counter))
            elif name == "compact":
                self._compact(log)
            elif name in ("model", "effort", "mode", "name"):
                self._control(name, arg.strip(), log)
            else:
                log.write(f"unknown command /{name}: /context /state /compact /model /effort")
        except ComalError as exc:
            log.write(f"[{exc.code}] {exc}")
        self.refresh_status()

    def _compact(self, log: RichLog) -> None:
        s = self.session
        if self.busy and self.agent is not None:
            # LIM-7: while the agent works, the derivation waits for the start of its next turn.
            self.agent.request_compact()
            log.write("compaction queued: it runs before the agent's next model call")
            return
        res = resolve_window(s.model, override=s.context_window)
        budget = Budget.for_window(res.window, system_tokens=0, tools_tokens=0)
        proposal = compact(View.from_ledger(s.ledger, s.scope), budget)
        if proposal is None:
            log.write("nothing to compact: only the protected tail follows the last checkpoint")
            return
        record = store_checkpoint(s.ledger, s.scope, proposal)
        log.write(f"checkpoint {record.id}: seq {record.first_seq}..{record.last_seq}")

    def _control(self, name: str, value: str, log: RichLog) -> None:
        """A human control, judged and receipted by the house like any operation (OPS-1/6)."""
        s = self.session
        if not value:
            log.write(f"/{name} needs a value, e.g. /{name} {_EXAMPLE[name]}")
            return
        call = ToolCall(f"tui-{uuid.uuid4().hex[:12]}", name, json.dumps({name: value}))
        outcome, _ = s.house.handle(call, Actor.user(s.user), surface="tui")
        log.write(outcome.result.text)
        if name == "model" and not outcome.result.is_error:
            s.model = value


_EXAMPLE = {"model": "anthropic:claude-sonnet-4-6", "effort": "high", "mode": "ask", "name": "x"}
