"""The house: judge, execute only if authorised, and leave a receipt (OPS-3).

:meth:`House.run` judges a proposal and, when allowed, executes it. Before anything with effects
runs, a preparation is recorded durably (RES-3): for native writes the path, the digest before
and the intended digest after; for everything else (shell, MCP) that the call started. The
result is then guarded (PIP-3) and returned with its receipt as an :class:`Outcome`, which
:meth:`House.record` writes (result message and receipt) in one ledger transaction. A call that
ran always leaves its receipt, even when a second writer on the session overtook its step
(:mod:`._unjoined`): given the step its result will join, the house checks it is still the
latest in the preparation's own transaction and runs nothing when it is not.

Nothing a handler raises leaves the house: an expected failure (any
:class:`~comal.errors.ComalError`, an ``OSError``) becomes an error result whose receipt names
its ``code``; anything else is a handler bug, recorded the same way and marked uncertain once
something with effects started. Native writes go through the workspace's directory
descriptors (:class:`~comal.ops.Workspace`): the digest check, the atomic replace and the read
back all use one descriptor of the judged directory.

Bash runs in the OS sandbox (:class:`~comal.ops.Sandbox`) built from the policy's
``sandbox`` settings; it masks comal's own files — its configuration and data directories, the
ledger file this house writes, ``COMAL_CONFIG``/``COMAL_LEDGER`` — and the ``protected_paths``
given to the house (key files, say). :meth:`House.sandbox_status` says whether it is available
and active.

A ``probe(phase, call_id)`` callback, when given, is called at ``judged``, ``prepared``,
``written`` and ``executed``, so fault tests can stop a process exactly between two phases.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ComalError, LedgerError, UserError
from ..ledger import LedgerBackend, Scope
from ..messages import Message, Role, ToolCall, ToolResult, sha256_hex
from ._errors import OperationTimeout, ToolFailure
from ._guard import guard_output
from ._held import SessionGuard

if TYPE_CHECKING:
    from ..plugins import HookOutcome

from ._hooks import post_note, post_tool_use, pre_note, pre_tool_use
from ._house_factory import HouseFactory, Probe
from ._judge import Judge, Judgment
from ._model import (
    Actor,
    CallContext,
    HostSettings,
    PlannedWrite,
    Status,
    Surface,
    ToolOutput,
    now,
)
from ._operation import Catalog, Operation, Registry
from ._policy import Policy
from ._receipt import OutputInfo, Receipt, disposition_for
from ._sandbox import Sandbox, SandboxStatus, default_protected_paths
from ._unjoined import kept_apart, overtaken
from ._workspace import atomic_write, digest_of, os_failure

if TYPE_CHECKING:
    from ..plugins import HookOutcome
    from ._running import OnOutput, StopSignal

__all__ = ["House", "HouseFactory", "Outcome", "Probe"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A judged proposal: its judgment, the tool message for the ledger, and its receipt."""

    judgment: Judgment
    message: Message
    receipt: Receipt

    @property
    def result(self) -> ToolResult:
        result = self.message.tool_result
        assert result is not None
        return result


def _failure(exc: BaseException) -> dict[str, Any]:
    """The observations that code a failure: the error's code and an OS error's errno name."""
    seen: dict[str, Any] = {"error": getattr(exc, "code", type(exc).__name__)}
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if isinstance(cause, OSError) and cause.errno is not None:
        seen["errno"] = errno.errorcode.get(cause.errno, str(cause.errno))
    return seen


def _hook_seen(hooks: HookOutcome | None) -> dict[str, Any]:
    """A PostToolUse outcome as the receipt keeps it (nothing when no hook answered)."""
    if hooks is None:
        return {}
    body = hooks.as_dict()
    return {"hooks": {"results": body["results"], "failures": body["failures"]}}


class House:
    """One house per session: a registry, a policy, a workspace and the session's ledger."""

    def __init__(self, factory: HouseFactory, scope: Scope) -> None:
        """Made by :meth:`HouseFactory.house`, the one way a house is built; a library caller
        with no factory of its own uses :meth:`House.of`, which makes one."""
        # No guard given: calls with effects run only while this process holds the session's
        # lock (:mod:`._held`). Kept in the factory, so a child session's house runs under it.
        guard = factory.guard if factory.guard is not None else SessionGuard(scope.session)
        self._made = factory if factory.guard is not None else replace(factory, guard=guard)
        policy = factory.policy
        ledger, registry, workspace = factory.ledger, factory.registry, factory.workspace
        settings, approver, hooks = factory.settings, factory.approver, factory.hooks
        protected_paths, bwrap = factory.protected_paths, factory.bwrap
        # The operator's command hooks (:class:`comal.hooks.CommandHooks`), which the built-in
        # ``comal-hooks`` plugin runs in this house's sandbox; the model cannot change them.
        self.hooks = hooks
        # The host's human controls (``/context``, ``/compact``) reach their handlers here.
        self.host = factory.host
        # Raises (a coded error) when this process may not change the session now, so two
        # houses on one session cannot interleave effects and split each other's steps.
        self._guard = guard
        self.ledger = ledger
        self.scope = scope
        self.registry = registry
        self.workspace = workspace
        self.settings = settings if settings is not None else HostSettings(mode=policy.mode)
        ledger_path = getattr(ledger, "path", None)
        if not isinstance(ledger_path, str | Path):
            ledger_path = None
        self.protected_paths: tuple[Path, ...] = tuple(
            dict.fromkeys(
                [
                    *default_protected_paths(ledger_path),
                    *(Path(p).expanduser() for p in protected_paths),
                ]
            )
        )
        self._sandbox: Sandbox | None = None
        if workspace is not None:
            self._sandbox = Sandbox(policy.sandbox, workspace.root, self.protected_paths, bwrap)
        cwd = str(workspace.root) if workspace is not None else None
        self.judge = Judge(
            registry,
            policy,
            self.settings,
            workspace=workspace,
            approver=approver,
            sandbox=self.sandbox,
            before=lambda call, surface, d: pre_tool_use(call, scope, surface, cwd, d, self),
        )
        self._probe = factory.probe

    @classmethod
    def of(
        cls,
        ledger: LedgerBackend,
        scope: Scope,
        registry: Registry,
        policy: Policy | None = None,
        **parts: Any,
    ) -> House:
        """A house of ``scope`` from a factory made of these parts (the keyword arguments of
        :class:`HouseFactory`): for a library caller that has no factory of its own."""
        factory = HouseFactory(ledger, registry, policy if policy is not None else Policy(),
                               **parts)  # fmt: skip
        return factory.house(scope)

    @property
    def factory(self) -> HouseFactory:
        """The factory of this house, with its policy as it stands now: a sibling built from it
        (a child session's house, the checks' house) keeps the workspace, the sandbox, the
        approver, the host and the session-lock guard."""
        return replace(self._made, policy=self.judge.policy)

    @property
    def policy(self) -> Policy:
        return self.judge.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self.judge.policy = policy

    def sandbox(self) -> Sandbox | None:
        """The sandbox Bash runs in, following the current policy (``None`` without a
        workspace)."""
        if self._sandbox is not None:
            self._sandbox.policy = self.judge.policy.sandbox
        return self._sandbox

    def sandbox_status(self) -> SandboxStatus:
        """Whether the OS sandbox is available here and active for this house's policy."""
        box = self.sandbox()
        if box is None:
            return SandboxStatus(False, False, "the house has no workspace, so no sandbox")
        return box.status

    def catalog(self, surface: Surface = "model") -> Catalog:
        return self.registry.catalog(surface)

    def require_held(self) -> None:
        """Raise :class:`~comal.ops.SessionNotHeld` unless this house may change its session
        now (its guard: the session's lock, by default). An agent asks before it appends."""
        self._guard()

    def _phase(self, phase: str, call_id: str) -> None:
        if self._probe is not None:
            self._probe(phase, call_id)

    # -- run ----------------------------------------------------------------------------------
    def run(
        self,
        call: ToolCall,
        actor: Actor,
        *,
        surface: Surface = "model",
        offered: Catalog | None = None,
        join_step: int | None = None,
        stop: StopSignal | None = None,
        on_output: OnOutput | None = None,
    ) -> Outcome:
        """Judge ``call`` for ``actor`` on ``surface``; execute it only if allowed. Given
        ``join_step`` (the step its result will join), a call with effects runs only if that
        step is still the session's latest when its preparation is written. ``stop`` and
        ``on_output`` reach the handler (:mod:`._running`): a person's stop, the output as it
        comes."""
        judgment = self.judge.judge(call, actor, surface, offered=offered)
        self._phase("judged", call.id)
        if not judgment.allowed:
            return self._refused(judgment)
        op, args = judgment.operation, judgment.args
        assert op is not None and args is not None
        ctx = CallContext(
            call.id,
            op.name,
            actor,
            surface,
            judgment.timeout or self.judge.policy.limits.default_timeout,
            self.ledger,
            self.scope,
            self.settings,
            self.workspace,
            judgment.paths,
            self.sandbox(),
            self.judge.policy.limits.output_cap,
            judgment.approval is not None and judgment.approval.granted,
            self.host,
            self.factory,
            stop=stop,
            on_output=on_output,
        )
        started = now()
        prepared: list[int] = []  # filled as soon as a preparation is durable, even on failure
        try:
            if not op.read_only:
                self._guard()
            if op.plan_write is not None:
                plan = op.plan_write(args, ctx)
                output = self._write(op, plan, judgment, prepared, join_step)
            else:
                assert op.handler is not None
                if not op.read_only:
                    extra: dict[str, Any] = {}
                    if op.intent is not None:
                        # Computed by reading only: nothing has an effect before it is durable.
                        extra["intent"] = dict(op.intent(args, ctx))
                        ctx = replace(ctx, intent=extra["intent"])
                    prepared.append(self._prepare(op, "start", judgment, extra, join_step))
                output = op.handler(args, ctx)
        except OperationTimeout as exc:
            output = ToolOutput(str(exc), is_error=True, timed_out=True, observations=_failure(exc))
        except (ComalError, OSError) as exc:
            # Expected failures: the handler refused, or the OS did, before any effect it
            # would have to own (a write that may have landed reports itself, below).
            if isinstance(exc, OSError):
                exc = os_failure(exc, op.name, "running the call")
            output = ToolOutput(str(exc), is_error=True, observations=_failure(exc))
        except Exception as exc:  # a handler bug must still leave a receipt, not a hole
            why = f"{op.name} raised {type(exc).__name__} after it started; effects unknown"
            output = ToolOutput(
                f"{op.name} failed: {type(exc).__name__}: {exc}",
                is_error=True,
                observations={"exception": type(exc).__name__, "reason": why, "error": "BUG"},
                # Once something with effects started, a crash in the middle proves nothing.
                uncertain=bool(prepared),
            )
        ended = now()
        self._phase("executed", call.id)
        hooks = self._after(judgment, output)
        first = prepared[0] if prepared else None
        return self._finish(judgment, op, output, started, ended, first, hooks)

    def _after(self, j: Judgment, output: ToolOutput) -> HookOutcome | None:
        """The lifecycle's PostToolUse of a model's call that ran."""
        if j.surface != "model":
            return None
        root = str(self.workspace.root) if self.workspace is not None else None
        response = {"text": output.text, "is_error": output.is_error}
        outcome = post_tool_use(j.call, self.scope, j.surface, root, response, self)
        return outcome if outcome else None

    def _refused(self, j: Judgment) -> Outcome:
        d = j.decision
        text = f"[denied by the house: {d.reason} (rule {d.rule})]"
        note = pre_note(j.hooks)
        if note:
            text = f"{text}\n\n{note}"
        receipt = Receipt(
            operation=j.call.name,
            call_id=j.call.id,
            actor=j.actor,
            surface=j.surface,
            arguments_digest=j.arguments_digest,
            judgment=j.as_dict(),
            status="denied",
            disposition="repeat",
            effects=j.effects,
        )
        result = ToolResult(j.call.id, text, is_error=True, name=j.call.name)
        return Outcome(j, Message(Role.TOOL, (result,)), receipt)

    def _finish(
        self,
        j: Judgment,
        op: Operation,
        output: ToolOutput,
        started: str,
        ended: str,
        preparation: int | None,
        hooks: HookOutcome | None = None,
    ) -> Outcome:
        status: Status = "timeout" if output.timed_out else "error" if output.is_error else "ok"
        if output.interrupted:
            status = "interrupted"
        if output.uncertain:
            status = "uncertain"
        inline, stored = guard_output(
            self.ledger,
            self.scope,
            call_id=j.call.id,
            operation=op.name,
            text=output.text,
            cap=op.inline_cap,
        )
        info = OutputInfo(
            sha256_hex(output.text),
            len(output.text.encode("utf-8", "surrogatepass")),
            len(output.text),
            stored.as_dict() if stored is not None else None,
        )
        receipt = Receipt(
            operation=op.name,
            call_id=j.call.id,
            actor=j.actor,
            surface=j.surface,
            arguments_digest=j.arguments_digest,
            judgment=j.as_dict(),
            status=status,
            disposition=disposition_for(status, j.effects),
            started_at=started,
            ended_at=ended,
            output=info,
            observations=dict(output.observations) | _hook_seen(hooks),
            effects=j.effects,
            preparation=preparation,
        )
        notes = [pre_note(j.hooks), post_note(hooks) if hooks is not None else ""]
        for note in filter(None, notes):
            inline = f"{inline}\n\n{note}"
        result = ToolResult(j.call.id, inline, is_error=status != "ok", name=op.name)
        return Outcome(j, Message(Role.TOOL, (result,)), receipt)

    # -- preparations (RES-3) -----------------------------------------------------------------
    def _prepare(
        self, op: Operation, kind: str, j: Judgment, extra: dict[str, Any], join_step: int | None
    ) -> int:
        body = {
            "v": 1,
            "call_id": j.call.id,
            "operation": op.name,
            "actor": j.actor.as_dict(),
            "surface": j.surface,
            "judgment": j.as_dict(),
            "arguments_digest": j.arguments_digest,
            "effects": [e.as_dict() for e in j.effects],
            **extra,
        }
        with self.ledger.atomic():
            # Checked where the preparation is written: a step overtaken now would leave the
            # result nowhere to go, so the call does not start.
            if join_step is not None and (
                late := overtaken(self.ledger, self.scope, j.call.id, join_step)
            ):
                raise late
            rec = self.ledger.add_record(self.scope, "preparation", kind, body)
        self._phase("prepared", j.call.id)
        return rec.id

    def _write(
        self,
        op: Operation,
        plan: PlannedWrite,
        j: Judgment,
        prepared: list[int],
        join_step: int | None,
    ) -> ToolOutput:
        before = sha256_hex(plan.before) if plan.before is not None else None
        intended = sha256_hex(plan.after)
        prepared.append(
            self._prepare(
                op,
                "write",
                j,
                {"path": plan.rel, "digest_before": before, "intended_digest": intended},
                join_step,
            )
        )
        observed: dict[str, Any] = {
            "path": plan.rel,
            "digest_before": before,
            "intended_digest": intended,
        }
        ws = self.workspace
        if ws is None or plan.rel.startswith(("/", "..")) or ws.root / plan.rel != plan.path:
            return self._write_by_path(plan, j, before, intended, observed)
        with ws.parent(plan.rel) as target:
            current = target.digest()
            if current != before:
                # Someone changed the file between the read and now: writing would clobber it.
                raise ToolFailure(
                    f"{plan.rel} changed after it was read (sha256 {current}, expected "
                    f"{before}); nothing was written. Read it again and make a new proposal"
                )
            target.replace(plan.after)
            self._phase("written", j.call.id)
            try:
                after = target.digest()
            except ComalError as exc:
                observed |= {"digest_after": None, "postcondition": False, **_failure(exc)}
                observed["reason"] = f"the file could not be read back: {exc}"
                text = f"{plan.summary}, but the file could not be read back"
                return ToolOutput(text, is_error=True, observations=observed, uncertain=True)
        return self._written(plan, after, intended, observed)

    def _write_by_path(
        self,
        plan: PlannedWrite,
        j: Judgment,
        before: str | None,
        intended: str,
        observed: dict[str, Any],
    ) -> ToolOutput:
        """A planned write outside any workspace (a host's own operation)."""
        current = digest_of(plan.path)
        if current != before:
            raise ToolFailure(
                f"{plan.rel} changed after it was read (sha256 {current}, expected {before}); "
                "nothing was written. Read it again and make a new proposal"
            )
        atomic_write(plan.path, plan.after)
        self._phase("written", j.call.id)
        return self._written(plan, digest_of(plan.path), intended, observed)

    @staticmethod
    def _written(
        plan: PlannedWrite, after: str | None, intended: str, observed: dict[str, Any]
    ) -> ToolOutput:
        observed |= {"digest_after": after, "postcondition": after == intended}
        if after != intended:
            observed["reason"] = "the file read back differs from the bytes written"
            text = f"{plan.summary}, but the file read back differs"
            return ToolOutput(text, is_error=True, observations=observed, uncertain=True)
        return ToolOutput(plan.summary, observations=observed)

    # -- record -------------------------------------------------------------------------------
    def record(
        self,
        outcome: Outcome,
        *,
        join_step: int | None = None,
        append_result: bool | None = None,
    ) -> Receipt:
        """Append the result message (model surface by default) and the receipt atomically.

        When the result cannot be appended (its step is no longer the session's latest, or
        the call is not in it), the receipt is recorded without it (:mod:`._unjoined`) and the
        reason is raised after: :class:`SessionContended`, or a :class:`UserError`."""
        append = outcome.receipt.surface == "model" if append_result is None else append_result
        unjoined: ComalError | None = None
        with self.ledger.atomic():
            entry_id: int | None = None
            if append:
                entry_id, unjoined = self._append_result(outcome, join_step)
            receipt = replace(outcome.receipt, result_entry=entry_id)
            if unjoined is not None:
                receipt = kept_apart(
                    self.ledger, self.scope, receipt, outcome.result.text, unjoined
                )
            rec = self.ledger.add_record(
                self.scope, "receipt", receipt.operation, receipt.to_body()
            )
        if unjoined is not None:
            raise unjoined
        return replace(receipt, record_id=rec.id, created_at=rec.created_at)

    def _append_result(
        self, outcome: Outcome, join_step: int | None
    ) -> tuple[int | None, ComalError | None]:
        """The result's entry id, or why it cannot join its step (the receipt goes on)."""
        call_id = outcome.result.call_id
        try:
            step = join_step if join_step is not None else self._step_of(outcome.result)
        except UserError as exc:
            return None, exc
        late = overtaken(self.ledger, self.scope, call_id, step)
        if late is not None:
            return None, late
        try:
            with self.ledger.atomic():  # a savepoint: a refused join leaves the receipt to write
                entries = self.ledger.append(self.scope, [outcome.message], join_step=step)
        except LedgerError:
            # A writer that does not wait for this transaction (another PostgreSQL client)
            # may still have got in between: then that is the reason, else the error is.
            late = overtaken(self.ledger, self.scope, call_id, step)
            if late is None:
                raise
            return None, late
        return entries[0].id, None

    def _step_of(self, result: ToolResult) -> int:
        """The latest step, which must hold the call this result answers: a result appended
        anywhere else would be an orphan in the conversation."""
        heads = self.ledger.heads(self.scope)
        step = heads[-1].step if heads else None
        if step is not None:
            for entry in self.ledger.entries(self.scope, start_seq=step):
                if any(c.id == result.call_id for c in entry.message.tool_calls):
                    return step
        raise UserError(
            f"call {result.call_id} is not in the session's latest step; append the assistant "
            "message that proposed it first, or record with append_result=False"
        )

    def handle(
        self,
        call: ToolCall,
        actor: Actor,
        *,
        surface: Surface = "model",
        offered: Catalog | None = None,
        join_step: int | None = None,
    ) -> tuple[Outcome, Receipt]:
        """:meth:`run` then :meth:`record`."""
        outcome = self.run(call, actor, surface=surface, offered=offered, join_step=join_step)
        return outcome, self.record(outcome, join_step=join_step)
