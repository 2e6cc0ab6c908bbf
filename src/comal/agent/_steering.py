"""The human operations that steer a session whose loop runs in a server's worker: ``prompt``,
``interrupt`` and ``approve`` (SRF-1).

In the TUI the person's words and answers reach the loop in-process (the input box, the
approval dialog); a web page reaches a loop it does not hold, so each of its actions is an
operation of the one registry on the ``api`` surface, judged and receipted with the caller the
server authenticated as the actor (OPS-2) — the request body never names anyone. The model's
catalog never lists them (audience ``human``, OPS-6). ``prompt`` and ``interrupt`` reach the
host running the loop through the narrow :class:`Steering` protocol; ``approve`` writes the
answer to the ledger, where the loop's :class:`~comal.agent._approvals.LedgerApprover` waits.

A ``prompt`` while the agent works is queued, not refused (DRV-3, :mod:`._queue`): it goes in
at the run's next safe point, or with ``queue`` once the run has finished; an ``interrupt``
stops the run now, a running command included (DRV-2, :mod:`._interrupt`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UserError
from ..ops import Actor, CallContext, Operation, Registry, Rule, Surface, ToolOutput
from ._approvals import answer, pending
from ._human import _coded

__all__ = [
    "STEERING_OPERATIONS",
    "ApprovalGone",
    "NotSteerable",
    "Steering",
    "always_rule",
]

_API: frozenset[Surface] = frozenset({"api"})


@runtime_checkable
class Steering(Protocol):
    """What ``prompt`` and ``interrupt`` ask of the host running the session's loop."""

    def submit(self, prompt: str | None, by: Actor, *, queue: bool = False) -> dict[str, Any]: ...
    def interrupt(self, by: Actor) -> bool: ...
    def allow_always(self, rule: Rule, by: Actor) -> None: ...


class NotSteerable(UserError):
    """The session's loop does not run in this host (no worker holds it)."""

    code = "SESSION_NOT_STEERABLE"


class ApprovalGone(UserError):
    """No pending approval by that id in this session (never asked, or already answered)."""

    code = "APPROVAL_NOT_PENDING"


class PromptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    prompt: str | None = Field(
        None,
        min_length=1,
        max_length=200_000,
        description="What to ask the agent; none resumes it as `comal --resume` does (RES-1).",
    )
    queue: bool = Field(
        False,
        description="While the agent works: wait until its run has finished, then start the "
        "next turn with it (Codex's Tab). False: it goes in at the run's next safe point, "
        "after the running call, before the next model call (Enter).",
    )


class InterruptArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApproveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    request: str = Field(pattern=r"^[0-9a-f]{32}$", description="The approval request's id.")
    granted: bool = Field(description="True allows the call, false refuses it.")
    reason: str = Field("", max_length=2_000, description="Why, for the receipt.")
    always: bool = Field(
        False,
        description="Also allow this operation on this exact subject for the rest of the "
        "session's run in this host (the TUI's 'always').",
    )


class AlwaysNotOffered(UserError):
    """'Always' was asked for a call that has no subject to pin a rule to, or a host that keeps
    no rules (an agent running elsewhere)."""

    code = "ALWAYS_NOT_OFFERED"


def always_rule(registry: Registry, operation: str, arguments: Any) -> Rule | None:
    """The rule "always" adds: this operation on this exact subject, or none when the
    operation has no subject to pin it to (always-allow-everything is not offered)."""
    op = registry.get(operation)
    if op is None or op.subject is None:
        return None
    try:
        subject = op.subject(op.input.model_validate(dict(arguments)))
    except (ValueError, TypeError):
        return None
    if not subject or (op.subject_kind == "path" and any(c in subject for c in "*?[")):
        return None
    return Rule(op.name, _literal(subject), "allow")


def _literal(subject: str) -> str:
    """``subject`` as a rule pattern that matches only itself (glob characters escaped)."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in subject)


def _steering(ctx: CallContext) -> Steering:
    if not isinstance(ctx.host, Steering):
        raise NotSteerable(
            f"{ctx.operation}: session {ctx.scope.session} has no loop in this host; start "
            "it from the web interface (POST /api/sessions) or resume it there with a prompt"
        )
    return ctx.host


def _prompt(args: PromptArgs, ctx: CallContext) -> ToolOutput:
    answer = _steering(ctx).submit(args.prompt, ctx.actor, queue=args.queue)
    session = ctx.scope.session
    if "queued" in answer:
        when = (
            "once its run has finished"
            if args.queue
            else "at its next safe point (after the running call)"
        )
        text = (
            f"the agent is working: the message is queued for session {session}; it goes in {when}"
        )
    elif args.prompt is not None:
        text = f"the agent works on the prompt for session {session}"
    else:
        text = f"resuming session {session} (no new prompt)"
    return ToolOutput(text, observations=answer)


def _interrupt(args: InterruptArgs, ctx: CallContext) -> ToolOutput:
    stopping = _steering(ctx).interrupt(ctx.actor)
    text = (
        "the agent stops now: a running command is stopped, the run ends"
        if stopping
        else "the agent is not working"
    )
    return ToolOutput(text, observations={"stopping": stopping})


def _approve(args: ApproveArgs, ctx: CallContext) -> ToolOutput:
    if args.always and args.granted:
        _always(args, ctx)
    try:
        body = answer(
            ctx.ledger,
            ctx.scope,
            args.request,
            granted=args.granted,
            by=ctx.actor,
            reason=args.reason,
        )
    except LookupError as exc:
        raise ApprovalGone(
            f"no pending approval {args.request} in session {ctx.scope.session}; list them "
            "with GET /api/approvals"
        ) from exc
    except UserError as exc:
        raise ApprovalGone(str(exc)) from exc
    said = "approved" if args.granted else "refused"
    return ToolOutput(f"{said} {args.request}", observations={"answer": body})


def _always(args: ApproveArgs, ctx: CallContext) -> None:
    """Add the rule before the answer, so the waiting agent's next call is judged with it."""
    asked = next((p for p in pending(ctx.ledger, ctx.scope) if p["id"] == args.request), None)
    if asked is None:
        raise ApprovalGone(f"no pending approval {args.request} in session {ctx.scope.session}")
    registry = ctx.factory.registry if ctx.factory is not None else None
    rule = None
    if registry is not None:
        rule = always_rule(registry, str(asked["operation"]), asked["arguments"])
    if rule is None or not isinstance(ctx.host, Steering):
        raise AlwaysNotOffered(
            f"'always' is not offered for this {asked['operation']} call (no subject to pin a "
            "rule to, or its agent runs elsewhere); allow it once instead"
        )
    ctx.host.allow_always(rule, ctx.actor)


STEERING_OPERATIONS: tuple[Operation, ...] = (
    # Only the ledger changes (a user message, an approval's answer); the agent's own calls are
    # judged on their own, so for the policy these are reads.
    Operation(
        "prompt",
        "Give the session's agent a prompt; it works until it stops. While it works, the prompt "
        "is queued and goes in at its next safe point (or, with queue, after its run).",
        PromptArgs,
        _coded(_prompt),
        audience="human",
        surfaces=_API,
    ),
    Operation(
        "interrupt",
        "Stop the session's agent now: a running command or model call included.",
        InterruptArgs,
        _coded(_interrupt),
        audience="human",
        surfaces=_API,
    ),
    Operation(
        "approve",
        "Answer a pending approval of the session's agent.",
        ApproveArgs,
        _coded(_approve),
        audience="human",
        surfaces=_API,
    ),
)
