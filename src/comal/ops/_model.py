"""Small values of the house: effects, actors, decisions, handler outputs and call contexts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._labels import part_label
from ..ledger import LedgerBackend, Scope
from ._errors import ToolFailure
from ._sandbox import Sandbox
from ._spool import DEFAULT_OUTPUT_CAP
from ._workspace import Workspace

if TYPE_CHECKING:
    from ._house_factory import HouseFactory
    from ._running import OnOutput, StopSignal

__all__ = [
    "READ_ONLY_EFFECTS",
    "SURFACES",
    "Actor",
    "ActorKind",
    "Audience",
    "CallContext",
    "Decision",
    "DecisionAction",
    "Disposition",
    "Effect",
    "EffectKind",
    "HostSettings",
    "Mode",
    "Part",
    "PlannedWrite",
    "Status",
    "Surface",
    "ToolOutput",
    "now",
]

EffectKind = Literal["none", "read", "write", "exec", "network", "publish", "unknown"]
# Only these leave the world as it was; everything else is a mutation the policy may gate.
READ_ONLY_EFFECTS: frozenset[str] = frozenset({"none", "read"})
Audience = Literal["model", "human", "both"]
Surface = Literal["model", "cli", "tui", "api"]
SURFACES: tuple[Surface, ...] = ("model", "cli", "tui", "api")
Mode = Literal["read-only", "ask", "trusted"]
# The modes from the strictest to the widest: read-only runs no effect, ask asks for each,
# trusted asks for none (a rule's ask or deny holds in every mode).
MODES: tuple[Mode, ...] = ("read-only", "ask", "trusted")
# ``not_applied``: after a crash, a native write proven not to have landed (the file still has
# its content from before); the only state from which the same call may run again on its own.
# ``interrupted``: a person stopped the run while the call ran (or before it started).
Status = Literal[
    "ok",
    "error",
    "denied",
    "timeout",
    "interrupted",
    "uncertain",
    "postcondition_observed",
    "not_applied",
]
Disposition = Literal["serve", "repeat", "basket"]
DecisionAction = Literal["allow", "deny", "ask"]
ActorKind = Literal["user", "operator", "subagent"]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class Effect:
    """What an operation may do to the world; ``paths``/``hosts`` where they are known."""

    kind: EffectKind
    paths: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.paths:
            out["paths"] = list(self.paths)
        if self.hosts:
            out["hosts"] = list(self.hosts)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Effect:
        return cls(data["kind"], tuple(data.get("paths", ())), tuple(data.get("hosts", ())))


@dataclass(frozen=True, slots=True)
class Actor:
    """Who a proposal is bound to. Supplied by the host, never read from a model's arguments
    (OPS-2): the session's user, an operator, or a sub-agent with its parent."""

    kind: ActorKind
    id: str
    parent: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("an actor needs an id")
        if (self.kind == "subagent") != (self.parent is not None):
            raise ValueError("a sub-agent actor needs its parent, and only a sub-agent has one")

    @classmethod
    def user(cls, id: str) -> Actor:
        return cls("user", id)

    @classmethod
    def operator(cls, id: str) -> Actor:
        return cls("operator", id)

    @classmethod
    def subagent(cls, id: str, parent: str) -> Actor:
        return cls("subagent", id, parent)

    @property
    def human(self) -> bool:
        return self.kind in ("user", "operator")

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "id": self.id}
        if self.parent is not None:
            out["parent"] = self.parent
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Actor:
        return cls(data["kind"], data["id"], data.get("parent"))


@dataclass(frozen=True, slots=True)
class Part:
    """The part of a compound command a decision was about: ``index`` of ``of``, from 1."""

    index: int
    of: int
    text: str

    def __str__(self) -> str:
        return part_label(self.index, self.of, self.text)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "of": self.of, "text": self.text}


@dataclass(frozen=True, slots=True)
class Decision:
    """A judgment as a small value, always carrying the rule that decided it (and, for a
    compound command, the part it decided on)."""

    action: DecisionAction
    rule: str
    reason: str = ""
    part: Part | None = None

    @classmethod
    def allow(cls, rule: str, reason: str = "") -> Decision:
        return cls("allow", rule, reason)

    @classmethod
    def deny(cls, rule: str, reason: str, part: Part | None = None) -> Decision:
        return cls("deny", rule, reason, part)

    @classmethod
    def ask(cls, rule: str, reason: str = "", part: Part | None = None) -> Decision:
        return cls("ask", rule, reason, part)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": self.action, "rule": self.rule, "reason": self.reason}
        if self.part is not None:
            out["part"] = self.part.as_dict()
        return out


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a handler returns: the exact text, whether it failed, and what it observed.
    ``uncertain`` says the effects could not be established (``observations["reason"]`` says
    why); such a call is never repeated automatically. ``interrupted``: a person stopped it
    while it ran (the host's :class:`~comal.ops.StopSignal`); the text keeps what it wrote."""

    text: str
    is_error: bool = False
    timed_out: bool = False
    observations: Mapping[str, Any] = field(default_factory=dict)
    uncertain: bool = False
    interrupted: bool = False


@dataclass
class HostSettings:
    """Human-audience controls (OPS-6): only the human surfaces' operations change these."""

    mode: Mode = "ask"
    model: str | None = None
    effort: str | None = None
    name: str | None = None
    account: str | None = None


@dataclass(frozen=True, slots=True)
class CallContext:
    """What the house hands a handler besides its validated arguments.

    ``paths`` maps each path argument to the workspace path the judge resolved it to: a
    handler opens exactly that (:meth:`path`), never a fresh resolution a racing process could
    have changed. ``approved`` says a human approved this very call.
    """

    call_id: str
    operation: str
    actor: Actor
    surface: Surface
    timeout: float
    ledger: LedgerBackend
    scope: Scope
    settings: HostSettings
    workspace: Workspace | None = None
    paths: Mapping[str, str] = field(default_factory=dict)
    sandbox: Sandbox | None = None
    output_cap: int = DEFAULT_OUTPUT_CAP
    approved: bool = False
    # The host's controls for the human operations over the engine (the agent runtime's);
    # ``None`` on a house no host runs.
    host: object = None
    # The factory of the house judging this call: an operation that runs calls of its own (a
    # board item's check, finish_call's checks) runs them through a sibling house, judged and
    # receipted like any other call.
    factory: HouseFactory | None = None
    # The intent recorded in this call's durable preparation (PLG-2), when its operation
    # declares one: the handler acts on exactly what was recorded.
    intent: Mapping[str, Any] | None = None
    # A person's request to stop the run (the handler that waits looks at it), and where the
    # call's output goes as it comes (:mod:`._running`); ``None`` where the host has neither.
    stop: StopSignal | None = None
    on_output: OnOutput | None = None

    def need_workspace(self) -> Workspace:
        if self.workspace is None:
            raise ToolFailure(f"{self.operation} needs a workspace root and the house has none")
        return self.workspace

    def path(self, raw: str) -> str:
        """The judged workspace path of the argument ``raw`` (located now if unjudged)."""
        judged = self.paths.get(raw)
        return judged if judged is not None else self.need_workspace().locate(raw)


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A native write computed before it happens, so its preparation can name the intended
    digest (RES-3). ``before`` is ``None`` when the file does not exist yet."""

    path: Path
    rel: str
    before: bytes | None
    after: bytes
    summary: str
