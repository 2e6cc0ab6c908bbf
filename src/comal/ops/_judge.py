"""The judge (OPS-2, OPS-7): contract, actor, confinement, permissions and limits.

Every surface calls the same :meth:`Judge.judge`. A proposal is bound to the host actor given by
the caller; its arguments are only ever data for the operation. Checks run in this order, and the
first failure decides with its rule:

1. ``audience:human``: a model proposal naming a human control (or guessing one);
2. ``contract:*``: unknown or not-offered operation, a contract that changed since the catalog
   was offered, arguments that are not a JSON object or do not validate (extra keys forbidden,
   so a forged ``actor`` or ``approved`` key is refused);
3. ``surface:*`` / ``audience:human``: the operation is not on this surface or not for this actor;
4. ``workspace``: a path argument outside the workspace root (or one that cannot be resolved:
   a symlink loop, a file used as a directory). Each path is resolved once; the judgment
   carries the result (:attr:`Judgment.paths`) and the handler opens exactly that;
5. the policy's rules and mode; "ask" goes to the approver, or becomes a deny when headless;
6. ``sandbox:unavailable``: an operation that must run in the OS sandbox (Bash), on a machine
   without a usable one, is refused unless a human approved this very call or the operator
   opted out (``sandbox.enabled = false`` / ``sandbox.allow_unsandboxed``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from .._labels import judgment_label
from ..messages import ToolCall, sha256_hex
from ._approval import Approval, ApprovalRequest, Approver
from ._controls import is_human_control
from ._errors import OpsError
from ._model import Actor, Decision, Effect, HostSettings, Surface
from ._operation import Catalog, Operation, Registry
from ._policy import Policy
from ._preview import change_preview
from ._sandbox import Sandbox
from ._workspace import Workspace

__all__ = ["IDENTITY_KEYS", "Judge", "Judgment"]

# Keys a model might use to pass itself off as someone or as already approved.
IDENTITY_KEYS = frozenset(
    {"actor", "user", "identity", "as_user", "approved", "approval", "approver", "authorized"}
)


# The lifecycle's PreToolUse: the decision as hooks leave it, and what they answered (or None).
Before = Callable[[ToolCall, Surface, Decision], tuple[Decision, Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class Judgment:
    """The house's verdict on one proposal; ``allowed`` means the handler may run."""

    call: ToolCall
    actor: Actor
    surface: Surface
    decision: Decision
    arguments_digest: str
    operation: Operation | None = None
    args: BaseModel | None = None
    approval: Approval | None = None
    timeout: float | None = None
    effects: tuple[Effect, ...] = ()
    paths: Mapping[str, str] = field(default_factory=dict)
    hooks: Mapping[str, Any] | None = None  # what PreToolUse hooks answered, when any did

    @property
    def allowed(self) -> bool:
        return self.decision.action == "allow" and self.args is not None

    @property
    def label(self) -> str:
        """How this judgment reads to a person ("approved by user ana", "allow by Bash(ls *)")."""
        return judgment_label(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        out = self.decision.as_dict()
        out["approval"] = self.approval.as_dict() if self.approval is not None else None
        out["contract"] = self.operation.contract if self.operation is not None else None
        if self.timeout is not None and self.operation is not None:
            out["limits"] = {"timeout": self.timeout, "inline_cap": self.operation.inline_cap}
        if self.hooks is not None:
            out["hooks"] = dict(self.hooks)
        return out


def _summarise(exc: ValidationError) -> str:
    bits = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        bits.append(f"{where}: {err['msg']}")
    return "; ".join(bits)


class Judge:
    def __init__(
        self,
        registry: Registry,
        policy: Policy,
        settings: HostSettings,
        *,
        workspace: Workspace | None = None,
        approver: Approver | None = None,
        sandbox: Callable[[], Sandbox | None] | None = None,
        before: Before | None = None,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.settings = settings
        self.workspace = workspace
        self.approver = approver
        self._sandbox = sandbox
        # The lifecycle's PreToolUse: it may only tighten what the policy decided.
        self.before = before

    def judge(
        self,
        call: ToolCall,
        actor: Actor,
        surface: Surface = "model",
        *,
        offered: Catalog | None = None,
    ) -> Judgment:
        digest = sha256_hex(call.arguments)

        def refuse(rule: str, reason: str, op: Operation | None = None) -> Judgment:
            return Judgment(call, actor, surface, Decision.deny(rule, reason), digest, op)

        admitted = self._admit(call.name, actor, surface, offered)
        if isinstance(admitted, tuple):
            return refuse(*admitted, self.registry.get(call.name))
        op = admitted
        args, problem = self._validate(op, call)
        if args is None:
            return refuse("contract:arguments", problem, op)
        located: dict[str, str] = {}
        if op.paths is not None:
            if self.workspace is None:
                return refuse("workspace", f"{op.name} needs a workspace and none is set", op)
            try:
                for raw in op.paths(args):
                    located[raw] = self.workspace.locate(raw)
            except OpsError as exc:
                return refuse("workspace", f"{exc} ({exc.code})", op)
        effects = op.effects_for(args, self.workspace, located)
        requested = getattr(args, "timeout", None)
        timeout = self.policy.limits.timeout_for(
            op.name, float(requested) if isinstance(requested, int | float) else None
        )
        subject = op.subject(args) if op.subject is not None else None
        if subject is not None and op.subject_kind == "path" and subject in located:
            subject = located[subject]
        decision = self.policy.decide(op, args, self.settings.mode, subject=subject)
        decision = self._under_sandbox(op, decision)
        hooks: Mapping[str, Any] | None = None
        if self.before is not None and surface == "model":
            decision, hooks = self.before(call, surface, decision)
        approval: Approval | None = None
        if decision.action == "ask":
            change = None
            if self.approver is not None:  # shown to the human asked, so read only then
                change = change_preview(args, self.workspace, located)
            decision, approval = self._ask(
                call, actor, surface, op, args, digest, decision, effects, change
            )
        return Judgment(
            call,
            actor,
            surface,
            decision,
            digest,
            op,
            args,
            approval,
            timeout,
            effects,
            located,
            hooks,
        )

    def _admit(
        self, name: str, actor: Actor, surface: Surface, offered: Catalog | None
    ) -> Operation | tuple[str, str]:
        """The operation named, or (rule, reason) when it may not be proposed at all: a human
        control from the model, an unknown operation, the wrong surface or audience, or a
        catalog it was not offered in (or that has changed since)."""
        op = self.registry.get(name)
        if surface == "model" and is_human_control(name):
            return (
                "audience:human",
                f"{name!r} is a human control (model, effort, mode, name, login); "
                "the model cannot propose it. Ask the user to change it",
            )
        if op is None:
            names = ", ".join(o.name for o in self.registry.for_surface(surface))
            return (
                "contract:unknown-operation",
                f"no operation named {name!r}; the {surface} surface offers: {names}",
            )
        if surface not in op.surfaces or (surface == "model" and op.audience == "human"):
            return (f"surface:{surface}", f"{op.name} is not offered on {surface}")
        if op.audience == "human" and not actor.human:
            return ("audience:human", f"only a user or operator may run {op.name}")
        if offered is not None:
            seen = offered.contract(op.name)
            if seen is None:
                return ("contract:not-offered", f"{op.name} was not in the catalog")
            if seen != op.contract:
                return (
                    "contract:stale",
                    f"{op.name}'s contract changed since the catalog was offered ({seen} -> "
                    f"{op.contract}); propose again against the current catalog",
                )
        return op

    def _under_sandbox(self, op: Operation, decision: Decision) -> Decision:
        """The policy's decision where the operation runs in an OS sandbox this machine lacks:
        an allow becomes a denial a human may override, an ask says what approving means."""
        sandbox = self._sandbox() if self._sandbox is not None and op.sandboxed else None
        if sandbox is None or not sandbox.refuses_unapproved:
            return decision
        if decision.action == "allow":
            return Decision.deny(
                "sandbox:unavailable",
                f"{op.name} runs in the OS sandbox and this machine has none "
                f"({sandbox.status.reason}) [SANDBOX_UNAVAILABLE]; a human may approve the call "
                "to run it unsandboxed, or the operator may set sandbox.allow_unsandboxed",
            )
        if decision.action == "ask":
            return replace(
                decision,
                reason=f"{decision.reason or 'approval required'}; there is no OS sandbox "
                "here, so approving runs it unsandboxed",
            )
        return decision

    def _validate(self, op: Operation, call: ToolCall) -> tuple[BaseModel | None, str]:
        if call.call_type != "function":
            return None, f"a {call.call_type!r} call carries raw text, not {op.name}'s arguments"
        try:
            raw = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return None, f"arguments are not JSON ({exc.msg} at {exc.pos}); send a JSON object"
        if not isinstance(raw, dict):
            return None, f"arguments must be a JSON object, not {type(raw).__name__}"
        forged = sorted(set(raw) & (IDENTITY_KEYS - set(op.input.model_fields)))
        try:
            return op.input.model_validate(raw), ""
        except ValidationError as exc:
            note = ""
            if forged:
                note = (
                    f" (the keys {', '.join(forged)} cannot carry identity or approval: the "
                    "house binds the actor and records approvals itself)"
                )
            return None, f"{op.name} arguments rejected: {_summarise(exc)}{note}"

    def _ask(
        self,
        call: ToolCall,
        actor: Actor,
        surface: Surface,
        op: Operation,
        args: BaseModel,
        digest: str,
        decision: Decision,
        effects: tuple[Effect, ...],
        change: str | None,
    ) -> tuple[Decision, Approval | None]:
        if self.approver is None:
            return (
                Decision.deny(
                    decision.rule,
                    f"{decision.reason or 'approval required'}, but no approver is attached "
                    "(headless); allow it with a rule or run with an approver",
                    decision.part,
                ),
                None,
            )
        request = ApprovalRequest(
            call.id,
            op.name,
            actor,
            surface,
            args.model_dump(mode="json"),
            digest,
            decision.rule,
            decision.reason,
            effects,
            change,
        )
        approval = self.approver.approve(request)
        # The rule stays the one that asked; the human's answer is the approval beside it, and
        # what every surface shows (:func:`comal.ops.judgment_label`: "approved by user ana").
        who = f"{approval.by.kind} {approval.by.id}"
        if approval.granted:
            return replace(decision, action="allow", reason=f"approved by {who}"), approval
        return replace(decision, action="deny", reason=f"refused by {who}"), approval
