"""The turn loop (OPS-3) and its recovery after an abrupt stop (RES-1..6).

One turn::

    intention (a user prompt, appended as a step)
    → assembly + spend guard + proposal          (Proposer: a complete response or an error)
    → the assistant message and its usage, appended as a new step
    → judgment + execution of each runnable call (the house)
    → result + receipt, appended atomically into that step

and again, until the task is closed, the run reaches ``max_turns``, or the task's budget is
spent (``budget_limited``). Between two steps, at a safe point, the messages a person sent
while it worked go in (:mod:`._queue`, :mod:`._safe_point`); a person's stop ends the run
now, whatever runs (:mod:`._interrupt`). Only ``finish_call`` closes a session (WRK-5,
RES-5): the model may propose it (alone in its reply), and when the model answers without it
the house runs it
itself (:meth:`Agent.finish`); either way the configured checks and every board item's check
run, and the session is marked finished only when all pass. A failed finish the model did not
see is told to it as a new user message. The agent's work steps, drafts and finish are its
:class:`~comal.agent._coordinator.Coordinator`'s.

Every state the loop needs is read back from the ledger, never kept only in memory, so a run can
stop anywhere and :meth:`Agent.run` (or ``resume``) picks up from what was recorded: reconcile
preparations without receipts through the house, run the calls that never started (or whose write
was proven ``not_applied``) after judging them under the current policy (RES-6), leave
``uncertain`` ones blocked with their result telling the model so, resume the work steps left
unfinished in their own sessions, and continue the loop without a new prompt. A finished
session is not sent to the model again.
"""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime

from ..context import get_engine
from ..errors import ComalError, UserError
from ..ledger import Entry, LedgerBackend, Scope
from ..messages import Message, Role, Text, ToolCall
from ..ops import Actor, House, OnOutput, Reconciled, StopSignal, reconcile
from ..providers import OnEvent, Provider
from ..work import FINISH, WorkAgent
from ._catalog import agent_catalog, recall_tools
from ._children import ChildModels, SameModel
from ._coordinator import Coordinator
from ._errors import BudgetLimited, HookStopped
from ._instructions import InstructionFiles
from ._intention import Preamble, intention, prompt_of, utc_now
from ._interrupt import Interrupted
from ._lifecycle import AgentHooks
from ._propose import Probe, Proposal, Proposer, Say
from ._queue import MODES
from ._queue import pending as queued_messages
from ._result import (
    RunResult,
    RunStatus,
    answer_of,
    receipt_mark,
    receipts_since,
    run_usage,
)
from ._safe_point import OnDelivered, SafePoint
from ._session import spawn_child
from ._settings import AgentSettings

__all__ = ["Agent", "Clock", "OnCallOutput", "Preamble", "intention", "prompt_of", "utc_now"]

Clock = Callable[[], datetime]
# (call id, stream, text): a running call's output as it comes.
OnCallOutput = Callable[[str, str, str], None]

RECOVERED_EVENT = "recovered"
REREAD_EVENT = "reread"


def _quiet(kind: str, text: str) -> None:
    pass


def _no_probe(phase: str, detail: str) -> None:
    pass


class Agent:
    """The loop for one session. ``house`` judges and executes (its policy is the current
    process's, RES-6); ``say(kind, text)`` reports progress (kinds ``turn``, ``call``,
    ``result``, ``note``, ``warn``); ``on_event`` receives streamed deltas; ``probe(phase,
    detail)`` is called between phases so fault tests can stop the process exactly there;
    ``clock`` gives the time a prompt's preamble states (CCH-1) and ``channel`` the surface it
    came through; ``children`` gives its work steps their models (default: its own provider).
    ``stop`` is a person's stop (the TUI's Escape, the page's Interrupt): it ends the run now,
    the running call or model call included; ``on_output(call_id, stream, text)`` hears a
    running call's output as it comes, ``on_delivered`` each message a person sent while it
    worked as it goes in.

    A house built without a host (or last run by another agent) gets this agent as its host,
    so ``finish_call`` and the work steps reach it; an agent that is not a sub-agent is offered
    the board, the work steps, drafts and ``finish_call`` (a sub-agent gets what its parent
    gave it)."""

    def __init__(
        self,
        ledger: LedgerBackend,
        scope: Scope,
        provider: Provider,
        house: House,
        settings: AgentSettings,
        *,
        actor: Actor | None = None,
        on_event: OnEvent | None = None,
        say: Say | None = None,
        probe: Probe | None = None,
        clock: Clock | None = None,
        channel: str | None = None,
        children: ChildModels | None = None,
        stop: StopSignal | None = None,
        on_output: OnCallOutput | None = None,
        on_delivered: OnDelivered | None = None,
    ) -> None:
        if house.scope != scope:
            raise UserError(f"the house serves session {house.scope.session}, not {scope.session}")
        self.ledger = ledger
        self.scope = scope
        self.provider = provider
        self.house = house
        self.settings = settings
        self.actor = actor if actor is not None else Actor.user(_user_name())
        self.say: Say = say or _quiet
        self.probe: Probe = probe or _no_probe
        self.on_event = on_event
        self.clock: Clock = clock or utc_now
        self.channel = channel
        self.stop = stop
        self.on_output = on_output
        self.safe = SafePoint(self, on_delivered)
        # What runs now, for the message an interruption leaves the model.
        self.doing = "between two steps"
        self.run_id = uuid.uuid4().hex
        if house.host is None or isinstance(house.host, Agent):
            # A house another agent ran before serves this one now.
            house.host = self
        # The one catalog function (`comal tools --surface model` prints the same); CCH-3:
        # deferred tools are found through ToolSearch, an operation like any other.
        engine = get_engine(settings.engine_name)
        subagent = self.actor.kind == "subagent"
        self.catalog = agent_catalog(house.registry, engine, subagent=subagent)
        self.proposer = Proposer(
            ledger,
            scope,
            provider,
            settings,
            self.catalog,
            self.run_id,
            on_event=on_event,
            say=self.say,
            probe=self.probe,
            hook_host=house,
            files=InstructionFiles(house.workspace),
            stop=stop,
        )
        self.turns = 0
        self.finishes = 0
        self.blocked: tuple[str, ...] = ()
        self._mark = receipt_mark(ledger, scope)
        self.coordinator = Coordinator(self, children or SameModel(provider))
        self._limited: str | None = None
        root = house.workspace.root if house.workspace is not None else None
        self.hooks = AgentHooks(
            ledger,
            scope,
            cwd=str(root) if root is not None else None,
            subagent=self.actor.kind == "subagent",
            say=self.say,
            host=house,
        )

    def work_agent(self, scope: Scope) -> WorkAgent | None:
        """:class:`~comal.work.WorkHost`: this agent's coordinator serves its own session."""
        return self.coordinator if scope == self.scope else None

    # -- the public surface -----------------------------------------------------------------
    def run(self, prompt: str | None = None) -> RunResult:
        """Recover whatever an earlier process left, append ``prompt`` if given, and loop.

        Without a prompt a finished session returns its recorded answer and calls nothing.
        Anything else needs the session: :class:`~comal.ops.SessionNotHeld` before anything is
        appended unless the house's guard is held (the session's lock, by default), so two
        agents on one session cannot interleave, and split, its steps."""
        info = self.ledger.session(self.scope)
        if info is None:
            raise UserError(f"no session {self.scope.session} in this tenant/agent")
        waiting = self._waiting()
        if info.status != "finished" or prompt is not None or waiting:
            self.house.require_held()
        if info.status == "finished":
            if prompt is None and not waiting:
                self.say("note", "the session is finished: nothing to do, the model is not called")
                return self.result("finished")
            self.ledger.set_status(self.scope, "active")
        try:
            status = self._runs(prompt, info.entries > 0)
        finally:
            # A run ends with its work steps: their calls need this process's session lock.
            self.coordinator.settle()
        if status == "budget_limited":
            return self.result(status, BudgetLimited(self._limited or "the budget is spent"))
        if status == "stopped":
            return self.result(status, HookStopped(self.hooks.halt or "a hook stopped the run"))
        return self.result(status)

    def _runs(self, prompt: str | None, resumed: bool) -> RunStatus:
        """The run's turns: what was sent before it goes in first, then ``prompt``; a message
        queued for the next turn starts it once this one is finished (DRV-3). A person's stop
        closes the step it cut (:class:`SafePoint`) and ends the run, unless they sent
        messages meanwhile: those go in at once and the run goes on with them (Codex's Esc)."""
        started = False
        while True:
            try:
                if not started:
                    started = True
                    self.blocked = self._recover()
                    self.hooks.session_start("resume" if resumed else "startup")
                    self.safe.deliver(MODES)
                    if prompt is not None:
                        self._intend(prompt)
                status = self._drive()
            except Interrupted:
                by = self.stop.by if self.stop is not None else "the user"
                self.safe.interrupted(by, self.doing)
                self.doing = "between two steps"
                if self.stop is None or not self._waiting():
                    raise
                self.stop.clear()
                self.say("note", "interrupted: the messages sent meanwhile go in now")
                self.safe.deliver(MODES)
                continue
            if status != "finished" or not self.safe.deliver(MODES):
                return status
            self.ledger.set_status(self.scope, "active")

    def resume(self, prompt: str | None = None) -> RunResult:
        """``comal --resume UUID [-p PROMPT]``: :meth:`run`, usually without a prompt (RES-1)."""
        return self.run(prompt)

    def finish(self) -> bool:
        """The model answered without ``finish_call``: the house runs it (the configured
        checks, the board's checks); only when all pass is the session marked finished
        (RES-5). A failure is appended as a user message so the model can fix it."""
        passed, report = self.coordinator.finish()
        self.say("result", report.splitlines()[0] if report else "finish")
        if passed:
            self.ledger.set_status(self.scope, "finished")
        else:
            self.ledger.append(self.scope, [_not_finished(report)])
        self.probe("checked", "passed" if passed else "failed")
        return passed

    def spawn_child(
        self,
        *,
        agent: str | None = None,
        title: str | None = None,
        provider: Provider | None = None,
        settings: AgentSettings | None = None,
    ) -> Agent:
        """A sub-agent in a child session (LED-3) of this session's agent unless ``agent``
        names another: its house from the parent's factory (same registry, policy, workspace,
        approver and lock guard); its proposals are bound to a sub-agent actor whose parent is
        this session."""
        child = spawn_child(self.ledger, self.scope, agent=agent, title=title)
        # The parent's factory: same registry, policy, workspace, sandbox, approver and the
        # session-lock guard (a child runs only while this process holds the parent's lock).
        house = self.house.factory.house(child)
        return Agent(
            self.ledger,
            child,
            provider if provider is not None else self.provider,
            house,
            settings if settings is not None else self.settings,
            actor=Actor.subagent(child.session, self.scope.session),
            on_event=self.on_event,
            say=self.say,
            clock=self.clock,
            stop=self.stop,
        )

    def request_compact(self) -> None:
        """LIM-7 ``/compact``: derive a checkpoint at the start of the next turn, not now."""
        self.proposer.compact_requested = True

    @property
    def last_proposal(self) -> Proposal | None:
        """The latest assembly, budget and estimate, for ``/context`` (LIM-7)."""
        return self.proposer.last

    def result(self, status: RunStatus, error: ComalError | None = None) -> RunResult:
        """This run's outcome as the ledger records it (see :class:`RunResult`)."""
        return RunResult(
            session=self.scope.session,
            status=status,
            answer=answer_of(self.ledger, self.scope),
            turns=self.turns,
            receipts=receipts_since(self.ledger, self.scope, self._mark),
            usage=run_usage(self.ledger, self.scope, self.run_id),
            blocked=self.blocked,
            error=None if error is None else {"code": error.code, "message": str(error)},
        )

    # -- the loop ---------------------------------------------------------------------------
    def _drive(self) -> RunStatus:
        turns = 0
        while True:
            last = self._last_entry()
            if last is None:
                raise UserError(
                    f"session {self.scope.session} has nothing to answer; give a prompt"
                )
            if last.role == Role.TOOL.value and self._closed_by_finish_call():
                self.ledger.set_status(self.scope, "finished")
                self.probe("checked", "passed")
                return "finished"
            if self.hooks.halt is not None:
                self.say("warn", self.hooks.halt)
                return "stopped"
            if last.role == Role.ASSISTANT.value and not last.message.tool_calls:
                if self.safe.deliver(("steer",)):
                    continue  # sent while the model answered: it answers that, not the end
                if self.hooks.stop():
                    continue  # a Stop hook's reason is now the newest message
                if self.hooks.halt is None and self.finish():
                    return "finished"
                continue  # the failed checks are now the newest message
            if turns >= self.settings.max_turns:
                self.say("warn", f"stopped after {turns} turns (max_turns); resume to continue")
                return "max_turns"
            limited = self.coordinator.over_budget()
            if limited is not None:
                self._limited = self.coordinator.stop_for_budget(limited)
                self.say("warn", self._limited)
                return "budget_limited"
            self._stopped()
            if self.safe.deliver(("steer",)):
                continue  # the next safe point: a person's message goes in before the model call
            self.doing = "while the model was answering"
            proposal = self.proposer.propose()
            step = self._append(proposal)
            turns += 1
            self.turns += 1
            for call in proposal.response.runnable_calls:
                self._execute(call, step)
            self.doing = "between two steps"

    def _intend(self, prompt: str) -> None:
        last = self._last_entry()
        if last is not None and last.role == Role.USER.value and prompt_of(last.message) == prompt:
            # The same prompt, still unanswered (a retry after a failed turn): answer the one
            # stored instead of storing it twice.
            self.say("note", "this prompt is already the newest message: answering it")
            return
        added = self.hooks.prompt(prompt)
        said = self.said(prompt, self.actor.id, self.channel)
        with self.ledger.atomic():  # the prompt and what its hooks added, or neither
            for message in (said, *added):
                self.ledger.append(self.scope, [message])
        self.probe("intended", self.scope.session)

    def said(self, prompt: str, sender: str, channel: str | None) -> Message:
        """``prompt`` as the session stores it: its preamble (CCH-1) names who sent it and
        through which surface."""
        root = self.house.workspace.root if self.house.workspace is not None else None
        preamble = Preamble(self.clock(), root, sender, channel)
        return intention(prompt, self.settings, preamble=preamble)

    def _append(self, proposal: Proposal) -> int:
        response = proposal.response
        usage = self.proposer.usage_input(response, proposal.turn)
        entries = self.ledger.append(self.scope, [response.message], usage=usage)
        self.probe("appended", str(entries[0].seq))
        return entries[0].step

    def _stopped(self) -> None:
        """A person's stop ends the run here, whatever the surface's probe does."""
        if self.stop is not None and self.stop.is_set():
            raise Interrupted(f"session {self.scope.session} was interrupted by {self.stop.by}")

    def _waiting(self) -> bool:
        """Whether a person's message waits for this session's agent."""
        return self.actor.kind != "subagent" and bool(queued_messages(self.ledger, self.scope))

    def _execute(self, call: ToolCall, step: int) -> None:
        self._stopped()  # a call the stop came before never starts
        self.say("call", f"{call.name} {call.arguments}")
        self.doing = f"while {call.name} ran"
        outcome = self.house.run(
            call,
            self.actor,
            offered=self.catalog,
            join_step=step,
            stop=self.stop,
            on_output=self._output(call.id),
        )
        receipt = self.house.record(outcome, join_step=step)
        self.hooks.after_call(call.name, outcome.judgment.hooks, receipt.observations.get("hooks"))
        self.say("result", f"{call.name}: {receipt.status} ({outcome.judgment.label})")
        # What the call returned (as stored): a person watching sees what the model will read;
        # each surface decides how much of it to show.
        self.say("output", outcome.result.text)
        self._nested_instructions(outcome.judgment.paths, receipt.status)
        if receipt.status == "ok" and call.name in recall_tools():  # the engines' read-backs
            # OBS-2 "reread": the model went back to stored evidence the engine had taken out.
            args = outcome.judgment.args
            body = {
                "v": 1,
                "call_id": call.id,
                "operation": call.name,
                "receipt": receipt.record_id,
            }
            body |= args.model_dump(mode="json") if args is not None else {}
            self.ledger.add_record(self.scope, "event", REREAD_EVENT, body)
        self.probe("recorded", call.id)
        self._stopped()

    def _output(self, call_id: str) -> OnOutput | None:
        sink = self.on_output
        if sink is None:
            return None
        return lambda stream, text: sink(call_id, stream, text)

    def _nested_instructions(self, located: Mapping[str, str], status: str) -> None:
        """DRV-1: a file tool let through under a subdirectory with its own AGENTS.md (or
        CLAUDE.md) loads that file into the system prompt from the next request on."""
        files = self.proposer.files
        if files is None or not located or status == "denied":
            return
        for folder in files.touch(located.values()):
            self.say("note", f"instructions of {folder}/ loaded: sent from the next request on")

    def _last_entry(self) -> Entry | None:
        tail = self.ledger.tail(self.scope, n=1)
        return tail[-1] if tail else None

    def _closed_by_finish_call(self) -> bool:
        """Whether the newest step is a ``finish_call`` that passed, every call answered."""
        step, calls = self.open_step()
        if calls:
            return False
        for entry in self.ledger.entries(self.scope, start_seq=step):
            result = entry.message.tool_result
            if result is None or result.is_error:
                continue
            op = self.house.registry.get(result.name or "")
            if result.name == FINISH or (op is not None and op.closes):
                return True
        return False

    # -- recovery ---------------------------------------------------------------------------
    def _recover(self) -> tuple[str, ...]:
        """Reconcile through the house and run what never started; return the blocked calls."""
        report = reconcile(
            self.ledger,
            self.scope,
            workspace=self.house.workspace,
            registry=self.house.registry,
        )
        for item in report.items:
            self.say("warn" if item.status == "uncertain" else "note", _recovered(item))
        blocked = tuple(i.call_id for i in report.items if i.status == "uncertain")
        pending = set(report.pending)
        if pending:
            step, calls = self.open_step()
            for call in calls:
                if call.id in pending:
                    self.say("note", f"{call.name} {call.id} never ran: judging it afresh")
                    self._execute(call, step)
        # Work steps left unfinished resume in their own sessions (WRK-3).
        self.coordinator.resume_steps()
        if report.items or pending:
            body = {
                "v": 1,
                "run": self.run_id,
                "reconciled": [
                    {"call_id": i.call_id, "status": i.status, "receipt": i.receipt}
                    for i in report.items
                ],
                "pending": sorted(pending),
                "blocked": list(blocked),
            }
            self.ledger.add_record(self.scope, "event", RECOVERED_EVENT, body)
        return blocked

    def open_calls(self) -> list[ToolCall]:
        """The newest step's calls that have no result yet (none: a safe point)."""
        return self.open_step()[1] if self.ledger.heads(self.scope) else []

    def open_step(self) -> tuple[int, list[ToolCall]]:
        heads = self.ledger.heads(self.scope)
        step = heads[-1].step
        entries = self.ledger.entries(self.scope, start_seq=step)
        answered = {e.message.tool_result.call_id for e in entries if e.message.tool_result}
        calls = [c for e in entries for c in e.message.tool_calls if c.id not in answered]
        return step, calls


def _recovered(item: Reconciled) -> str:
    what = f"{item.operation} {item.call_id}"
    if item.status == "uncertain":
        return (
            f"{what} is uncertain after the interruption ({item.reason}); it is blocked and "
            "will not be repeated: the model is told, and must inspect first"
        )
    if item.status == "not_applied":
        return f"{what} never landed ({item.reason}); it will be judged and run again"
    return f"{what}: {item.status} ({item.reason or 'observed'})"


def _not_finished(report: str) -> Message:
    lines = ["[comal] The task is not finished: finish_call did not pass.", report]
    lines.append("Fix what it reports, then answer again (or call finish_call).")
    return Message(Role.USER, (Text("\n\n".join(lines)),), name="comal")


def _user_name() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"
