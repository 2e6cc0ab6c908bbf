"""What an agent does beyond its loop (WRK-1..5): delegate work steps, wait for them, finish
the task through ``finish_call``, and keep to the task's budget.

:class:`Coordinator` is the :class:`~comal.work.WorkAgent` of one agent; the handlers of
``WorkStepRun``, ``WorkStepWait`` and ``finish_call`` reach it through the house's host.

- ``WorkStepRun``: the call's delegation record and its child session (its first message the
  objective; its agent the coordinator's, so the step recalls only what that agent holds) are
  written in one transaction before the child starts; a call judged again after
  a crash finds the record by its call id and makes no second child. The child then runs in a
  thread (:class:`~comal.agent._children.Children`), as a ``work_started`` … ``work_ended``
  pair of events in the parent.
- ``WorkStepWait``: starts (resumes) every named step that is unfinished and not running, waits,
  and answers from the children's ledgers (:func:`comal.work.steps_of`).
- ``finish_call``: refuses while a step is unfinished, and while a step that ended incomplete
  is not named in its ``accept_incomplete`` with a reason (``FINISH_INCOMPLETE``; what it
  accepts is recorded); runs the configured checks (as the operator,
  :func:`comal.agent.run_checks`) and every closed board item's check (as the model's own
  call); passes only when all pass and every item is done. The agent's "checks when the model
  stops" is this same operation, run by the house on the ``api`` surface, accepting nothing.
- The budget: the tokens and requests of the session and all its work steps, every run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..context import engine_names
from ..errors import ComalError
from ..ledger import LedgerBackend, Scope
from ..messages import ToolCall
from ..ops import Actor, CallContext, Registry, ToolOutput
from ..providers import (
    Provider,
    SDKProvider,
    model_name_of,
)
from ..safe_text import one_line
from ..work import (
    BUDGET_EVENT,
    DELEGATED,
    ENDED,
    FINISH,
    FINISH_EVENT,
    STARTED,
    AcceptIncomplete,
    Board,
    Delegation,
    FinishRefused,
    StepState,
    WorkStepRefused,
    WorkStepRunInput,
    WorkStepWaitInput,
    accepted_incomplete,
    board_of,
    check_item,
    delegation_for,
    delegations,
    drafts_of,
    steps_of,
    work_operations,
)
from ._children import ChildModels, Children, child_registry, child_settings
from ._errors import SessionLocked
from ._session import CHECKER, Check, lock_session, run_checks

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["CHECKS_EVENT", "Coordinator", "task_spend"]

CHECKS_EVENT = FINISH_EVENT
_TAIL = 2_000
# The house runs finish_call itself (when the model stops) through a house offering only it.
_FINISH_REGISTRY = Registry(op for op in work_operations() if op.name == FINISH)


def task_spend(ledger: LedgerBackend, scope: Scope, depth: int = 0) -> tuple[int, int]:
    """(tokens, requests) of the session and its descendants, over every run."""
    totals = ledger.usage_totals(scope)
    tokens = sum(int(totals.get(k) or 0) for k in ("new_input", "cache_read", "cache_write"))
    tokens += int(totals.get("output") or 0)
    turns = int(totals.get("requests") or 0)
    if depth < 8:
        for child in ledger.children(scope):
            t, n = task_spend(ledger, child.scope, depth + 1)
            tokens, turns = tokens + t, turns + n
    return tokens, turns


def _prefixed(say: Callable[[str, str], None], prefix: str) -> Callable[[str, str], None]:
    def said(kind: str, text: str) -> None:
        say(kind, prefix + text)

    return said


class Coordinator:
    """The :class:`~comal.work.WorkAgent` of one agent (see the module docstring)."""

    def __init__(self, agent: Agent, models: ChildModels) -> None:
        self.agent = agent
        self.models = models
        self.children = Children(agent.settings.work.parallel)

    @property
    def ledger(self) -> LedgerBackend:
        return self.agent.ledger

    @property
    def scope(self) -> Scope:
        return self.agent.scope

    # -- WorkStepRun ---------------------------------------------------------------------------
    def delegate(self, args: WorkStepRunInput, ctx: CallContext) -> ToolOutput:
        d = delegation_for(self.ledger, self.scope, ctx.call_id)
        if d is None:
            d = self._delegate(args, ctx.call_id)
        state = steps_of(self.ledger, self.scope, [d])[0]
        if state.outcome == "unfinished":
            self.start(d)
            said = f"work step #{d.n} started in child session {d.child}"
        else:
            said = f"work step #{d.n} (child session {d.child}) is {state.outcome} already"
        tools = ", ".join(d.config.get("tools") or ()) or "none"
        text = f"{said} (tools: {tools}); collect its result with WorkStepWait(steps=[{d.n}])"
        return ToolOutput(text, observations={"step": d.n, "child": d.child, "record": d.record})

    def _delegate(self, args: WorkStepRunInput, call_id: str) -> Delegation:
        from ._agent import Preamble, intention

        a = self.agent
        registry = child_registry(a.house.registry, args.tools)
        if args.engine is not None and args.engine not in engine_names():
            raise WorkStepRefused(
                f"unknown engine {args.engine!r}; this comal has: {', '.join(engine_names())}"
            )
        n = len(delegations(self.ledger, self.scope)) + 1
        spec = self.models.spec(n, args.model)
        work = a.settings.work
        turns = min(args.max_turns or work.max_turns, work.max_turns)
        budget = args.budget
        left = self._left()
        if left[0] is not None:
            budget = min(budget or left[0], left[0])
        if left[1] is not None:
            turns = max(1, min(turns, left[1]))
        config: dict[str, Any] = {
            "tools": [op.name for op in registry],
            "engine": args.engine or a.settings.engine_name,
            "window": args.window,
            "max_turns": turns,
            "budget": budget,
            "model": spec,
        }
        model = model_name_of(spec) if spec else a.settings.model
        settings = child_settings(a.settings, config, model, self.ledger.counter)
        root = a.house.workspace.root if a.house.workspace is not None else None
        preamble = Preamble(a.clock(), root, f"work step #{n} of {self.scope.session}", "work")
        meta = {
            "model": spec,
            "workspace": str(root) if root is not None else None,
            "engine": config["engine"],
            "delegation": {"parent": self.scope.session, "call_id": call_id, "n": n},
        }
        # The child is the coordinator's agent's session (LED-3 links it by parent): what it
        # recalls is that agent's, by the ledger's own (tenant, agent) scope, never another's.
        agent = self.scope.agent
        with self.ledger.atomic():
            child = self.ledger.create_session(
                self.scope.tenant,
                agent,
                parent=self.scope.session,
                title=one_line(args.objective)[:80],
                meta=meta,
                messages=[intention(args.objective, settings, preamble=preamble)],
            )
            body = {"v": 1, "call_id": call_id, "n": n, "child": child.session}
            body |= {"agent": agent, "objective": args.objective, "config": config}
            record = self.ledger.add_record(self.scope, "event", DELEGATED, body)
        a.probe("delegated", child.session)
        return Delegation(record.id, n, call_id, child.session, agent, args.objective, config)

    def _left(self) -> tuple[int | None, int | None]:
        """What the task's budget has left (tokens, turns); ``None`` where unlimited."""
        budget = self.agent.settings.budget
        if not budget.limited:
            return None, None
        tokens, turns = task_spend(self.ledger, self.scope)
        return (
            None if budget.tokens is None else max(0, budget.tokens - tokens),
            None if budget.turns is None else max(0, budget.turns - turns),
        )

    # -- running steps -------------------------------------------------------------------------
    def start(self, d: Delegation) -> None:
        self.children.start(d.child, lambda: self._run(d))

    def _run(self, d: Delegation) -> None:
        """One run of a step, in its thread: its lock, its agent, the start and end events."""
        a = self.agent
        scope = d.scope(self.scope)
        status, error, run = "error", None, None
        try:
            with lock_session(self.ledger, scope):
                child = self._child(d)
                run = child.run_id
                body = {"v": 1, "child": d.child, "n": d.n, "run": run}
                self.ledger.add_record(self.scope, "event", STARTED, body)
                a.say("note", f"work step #{d.n} runs in {d.child}")
                try:
                    result = child.run(None)
                except ComalError as exc:
                    result = child.result("error", exc)
                finally:
                    self._close(child.provider)
                status, error = result.status, result.error
        except SessionLocked as exc:
            # Another runner holds the step (a process resuming it directly): it is not over.
            a.say("warn", f"work step #{d.n} is not run here: {exc}")
            return
        except ComalError as exc:
            error = {"code": exc.code, "message": str(exc)}
        except Exception as exc:  # a step's bug leaves it incomplete, never looking alive
            error = {"code": "BUG", "message": f"{type(exc).__name__}: {exc}"}
        body = {"v": 1, "child": d.child, "n": d.n, "run": run, "status": status, "error": error}
        self.ledger.add_record(self.scope, "event", ENDED, body)
        a.say("note" if status == "finished" else "warn", f"work step #{d.n} ended: {status}")

    def _close(self, provider: Provider) -> None:
        if provider is not self.agent.provider and isinstance(provider, SDKProvider):
            provider.close()

    def _child(self, d: Delegation) -> Agent:
        from ._agent import Agent

        a = self.agent
        scope = d.scope(self.scope)
        spec = d.config.get("model")
        spec = str(spec) if spec else None
        model = model_name_of(spec) if spec else a.settings.model
        settings = child_settings(a.settings, d.config, model, self.ledger.counter)
        registry = child_registry(a.house.registry, d.config.get("tools"))
        # The parent's factory, narrowed: its policy, workspace, sandbox, approver and guard.
        house = a.house.factory.but(registry=registry, host=None).house(scope)
        return Agent(
            self.ledger,
            scope,
            self.models.provider(spec, scope),
            house,
            settings,
            actor=Actor.subagent(scope.session, self.scope.session),
            say=_prefixed(a.say, f"[step #{d.n}] "),
            probe=a.probe,
            clock=a.clock,
            channel="work",
            children=self.models,
            stop=a.stop,  # a person's stop reaches the steps' running calls too
        )

    def resume_steps(self) -> None:
        """After a crash: every unfinished step resumes in its own session."""
        for state in steps_of(self.ledger, self.scope):
            if state.outcome == "unfinished" and not self.children.running(state.delegation.child):
                self.agent.say("note", f"work step #{state.delegation.n} resumes")
                self.start(state.delegation)

    def settle(self) -> None:
        """Wait for the steps still running (a run ends with its children)."""
        self.children.join_all()

    # -- WorkStepWait --------------------------------------------------------------------------
    def wait(self, args: WorkStepWaitInput, ctx: CallContext) -> ToolOutput:
        every = delegations(self.ledger, self.scope)
        if args.steps is not None:
            wanted = set(args.steps)
            missing = wanted - {d.n for d in every}
            if missing:
                raise WorkStepRefused(
                    f"no work step {', '.join(f'#{n}' for n in sorted(missing))} in this "
                    f"session (it has {len(every)})"
                )
            chosen = [d for d in every if d.n in wanted]
        else:
            reported = self._reported()
            chosen = [d for d in every if d.n not in reported]
        if not chosen:
            return ToolOutput("no work step to wait for: every one was reported already")
        for state in steps_of(self.ledger, self.scope, chosen):
            if state.outcome == "unfinished":
                self.start(state.delegation)
        self.children.join([d.child for d in chosen], args.timeout)
        states = [self._live(s) for s in steps_of(self.ledger, self.scope, chosen)]
        text = "\n\n".join(s.render() for s in states)
        return ToolOutput(text, observations={"steps": [s.as_dict() for s in states]})

    def _live(self, state: StepState) -> StepState:
        if state.outcome == "unfinished" and self.children.running(state.delegation.child):
            return replace(state, status="running")
        return state

    def _reported(self) -> set[int]:
        done: set[int] = set()
        for rec in self.ledger.records(self.scope, "receipt", kinds=("WorkStepWait",)):
            steps = (rec.body.get("observations") or {}).get("steps") or []
            done |= {int(s["n"]) for s in steps if s.get("outcome") != "unfinished"}
        return done

    # -- finish_call ---------------------------------------------------------------------------
    def finish_call(
        self, ctx: CallContext, accepted: Sequence[AcceptIncomplete] = ()
    ) -> ToolOutput:
        if ctx.surface == "model":
            heads = self.ledger.heads(self.scope)
            step = self.ledger.entries(self.scope, start_seq=heads[-1].step) if heads else []
            calls = [c.id for e in step for c in e.message.tool_calls]
            if ctx.call_id in calls and len(calls) > 1:
                raise FinishRefused(
                    "finish_call closes the session, so it is the only call of its reply; "
                    "propose the other calls first, then finish_call alone"
                )
        return self._finish(ctx.call_id, accepted)

    def _finish(self, origin: str, accept: Sequence[AcceptIncomplete] = ()) -> ToolOutput:
        a = self.agent
        states = steps_of(self.ledger, self.scope)
        waiting = [self._live(s) for s in states if s.outcome == "unfinished"]
        if waiting:
            lines = ["[finish] NOT finished: work steps are not done yet:"]
            lines += [f"- {s.headline()}" for s in waiting]
            lines.append("Collect them with WorkStepWait, then call finish_call again.")
            seen = {"passed": False, "waiting": [s.delegation.n for s in waiting]}
            return self._finished(origin, "\n".join(lines), seen, [], [])
        accepted = accepted_incomplete(states, accept)
        gates = [
            why for op in a.house.registry
            if op.finish_gate is not None and (why := op.finish_gate(self.ledger, self.scope))
        ]  # fmt: skip
        if gates:
            # A plugin's task (a browser's tests) is not done: nothing else runs until it is.
            lines = ["[finish] NOT finished:", *(f"- {why}" for why in gates)]
            seen = {"passed": False, "gates": gates}
            return self._finished(origin, "\n".join(lines), seen, [], [], accepted)
        checks = run_checks(a.house, a.settings.checks, a.run_id)
        for c in checks:
            a.say("result", f"check `{c.command}`: {c.status}")
        board = board_of(self.ledger, self.scope)
        changes = []
        for item in board.items:
            if item.check is not None and item.closed:
                changes.append(check_item(a.house.factory, self.scope, a.actor, item, origin))
                a.say("result", f"board #{item.id} check `{item.check}`: {changes[-1]['status']}")
        after = board
        for change in changes:
            after = after.apply(change, 0)
        failed = [c for c in changes if not c["passed"]]
        passed = all(c.passed for c in checks) and not after.open_items and not failed
        text = _finish_report(passed, checks, after, failed, accepted)
        seen = {"passed": passed, "open": [i.id for i in after.open_items], "board": changes}
        return self._finished(origin, text, seen, checks, changes, accepted)

    def _finished(
        self,
        origin: str,
        text: str,
        seen: dict[str, Any],
        checks: list[Check],
        changes: list[dict[str, Any]],
        accepted: list[dict[str, Any]] | None = None,
    ) -> ToolOutput:
        listed = [{"command": c.command, "status": c.status, "receipt": c.receipt} for c in checks]
        seen = {"checks": listed} | seen | {"accepted_incomplete": accepted or []}
        body = {"v": 1, "run": self.agent.run_id, "call_id": origin}
        body |= {"passed": seen["passed"], "checks": listed, "board": changes}
        body |= {"accepted_incomplete": accepted or []}
        self.ledger.add_record(self.scope, "event", CHECKS_EVENT, body)
        return ToolOutput(text, is_error=not seen["passed"], observations=seen)

    def finish(self) -> tuple[bool, str]:
        """The house runs ``finish_call`` itself (the model stopped): as the operator, on the
        ``api`` surface, receipted, with no conversation entry. (passed, its report). With
        nothing to verify — no configured checks, no board, no work steps — it passes without
        a call, as a session that never used them always closed."""
        a = self.agent
        gated = any(op.finish_gate is not None for op in a.house.registry)
        if not (a.settings.checks or gated or board_of(self.ledger, self.scope).items):
            if not delegations(self.ledger, self.scope):
                # Nothing to verify: it passes, and leaves no receipt (nothing was checked).
                return True, "[finish] nothing to check: no configured checks, no board"
        house = a.house.factory.but(registry=_FINISH_REGISTRY, host=a).house(self.scope)
        call = ToolCall(f"finish-{a.run_id}-{a.turns}-{a.finishes}", FINISH, "{}")
        a.finishes += 1
        outcome = house.run(call, CHECKER, surface="api")
        receipt = house.record(outcome, append_result=False)
        return receipt.status == "ok", outcome.result.text

    # -- the task's budget ---------------------------------------------------------------------
    def over_budget(self) -> dict[str, Any] | None:
        """What the task spent and what remains when its budget is spent; else ``None``."""
        budget = self.agent.settings.budget
        if not budget.limited:
            return None
        tokens, turns = task_spend(self.ledger, self.scope)
        over_tokens = budget.tokens is not None and tokens >= budget.tokens
        over_turns = budget.turns is not None and turns >= budget.turns
        if not (over_tokens or over_turns):
            return None
        board = board_of(self.ledger, self.scope)
        steps = [s for s in steps_of(self.ledger, self.scope) if s.outcome != "finished"]
        remains = [f"board #{i.id} [{i.status}] {one_line(i.text)}" for i in board.open_items]
        remains += [s.headline() for s in steps]
        what = "tokens" if over_tokens else "turns"
        why = (
            f"the task's budget is spent: {tokens:,} tokens of {budget.tokens or '∞'}, "
            f"{turns:,} turns of {budget.turns or '∞'} ({what})"
        )
        return {
            "v": 1,
            "run": self.agent.run_id,
            "why": why,
            "spent": {"tokens": tokens, "turns": turns},
            "budget": {"tokens": budget.tokens, "turns": budget.turns},
            "remains": remains,
            "drafts": [d.title for d in drafts_of(self.ledger, self.scope)],
        }

    def stop_for_budget(self, limited: dict[str, Any]) -> str:
        """Record the stop (the board and the drafts stay as they are); the message saying
        what remains."""
        self.ledger.add_record(self.scope, "event", BUDGET_EVENT, limited)
        remains = "; ".join(limited["remains"]) or "nothing on the board or in work steps"
        return (
            f"{limited['why']}. What remains: {remains}. The board and the drafts are kept; "
            "the operator may raise work.budget in the configuration, then resume"
        )


def _finish_report(
    passed: bool,
    checks: list[Check],
    board: Board,
    failed: list[Any],
    accepted: list[dict[str, Any]],
) -> str:
    taken = [
        f"- accepted incomplete: step #{a['step']} ({a['status']}): {one_line(a['reason'])}"
        for a in accepted
    ]
    if passed:
        head = f"[finish] passed: {len(checks)} configured check(s)"
        head += f", {sum(i.status == 'verified' for i in board.items)} board item(s) verified"
        head += "".join(f"\n{line}" for line in taken)
        return head + (f"\n\n{board.render()}" if board.items else "")
    lines = ["[finish] NOT finished:", *taken]
    for c in checks:
        if not c.passed:
            lines.append(f"- check failed ({c.status}, receipt {c.receipt}):\n$ {c.command}")
            lines.append(c.output[-_TAIL:])
    for change in failed:
        lines.append(f"- board #{change['item']}: its check failed: $ {change['command']}")
        lines.append(str(change.get("tail", ""))[-_TAIL:])
    for item in board.open_items:
        lines.append(f"- board #{item.id} is {item.status}: {one_line(item.text)}")
    if board.items:
        lines.append(board.render())
    return "\n".join(lines)
