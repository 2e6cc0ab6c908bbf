"""``WorkStepRun``, ``WorkStepWait`` and ``finish_call``: operations whose handler needs the
agent that runs the session (WRK-1, WRK-5).

The house reaches that agent through its host (``CallContext.host``): a :class:`WorkHost`
answers :meth:`~WorkHost.work_agent` for the session of the call — the agent runtime for the
session it runs, an agent for the house it was given without a host (a child's, a library
caller's). The agent side implements :class:`WorkAgent`; everything it records is read back by
:mod:`._steps` and :mod:`._board`, so none of it lives only in a process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..ledger import Scope
from ..ops import CallContext, Effect, Operation, Registry, Surface, ToolOutput
from ._board_ops import board_operations
from ._drafts import draft_operation
from ._errors import NoWorkAgent

__all__ = [
    "COORDINATOR_ONLY",
    "FINISH",
    "AcceptIncomplete",
    "FinishInput",
    "WorkAgent",
    "WorkHost",
    "WorkStepRunInput",
    "WorkStepWaitInput",
    "ensure_work_operations",
    "work_operations",
]

FINISH = "finish_call"
# What a child is never given: it does its step; delegating, composing and closing the task are
# the coordinator's.
COORDINATOR_ONLY = frozenset({"WorkStepRun", "WorkStepWait", "WorkDraft", FINISH})

ToolName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


class WorkStepRunInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str = Field(
        min_length=1, max_length=20_000, description="The step, stated so it can be done alone."
    )
    tools: list[ToolName] | None = Field(
        None, max_length=64, description="A subset of your tools; default: all of yours."
    )
    engine: str | None = Field(
        None, min_length=1, max_length=40, description="Context engine; default: yours."
    )
    window: int | None = Field(
        None, ge=1_024, le=10_000_000, description="Context window cap (never above yours)."
    )
    max_turns: int | None = Field(None, ge=1, le=10_000, description="Model turns it may take.")
    budget: int | None = Field(None, ge=1_000, description="Tokens it may spend in all.")
    model: str | None = Field(
        None, min_length=1, max_length=500, description="A model the operator allows children."
    )


class WorkStepWaitInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, max_length=64, description="Step numbers (#n); default: every step not reported."
    )
    timeout: float | None = Field(
        None, gt=0, le=86_400, description="Seconds to wait; default: until they end."
    )


class AcceptIncomplete(BaseModel):
    """A work step that ended incomplete, accepted at finish, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: int = Field(ge=1, description="The step's number (#n) that ended incomplete.")
    reason: str = Field(
        min_length=1, max_length=2_000, description="Why the task holds without that step."
    )

    @field_validator("reason")
    @classmethod
    def _words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a reason is words, not blanks")
        return value


class FinishInput(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    accept_incomplete: list[AcceptIncomplete] = Field(
        default_factory=list,
        max_length=64,
        description="Each work step that ended incomplete and that you accept, with why; "
        "finish_call refuses while an incomplete step is not named here.",
    )


@runtime_checkable
class WorkAgent(Protocol):
    """What the work operations ask of the agent running the session."""

    def delegate(self, args: WorkStepRunInput, ctx: CallContext) -> ToolOutput: ...
    def wait(self, args: WorkStepWaitInput, ctx: CallContext) -> ToolOutput: ...
    def finish_call(
        self, ctx: CallContext, accepted: Sequence[AcceptIncomplete] = ()
    ) -> ToolOutput: ...


@runtime_checkable
class WorkHost(Protocol):
    """A house's host that knows the agent running a session."""

    def work_agent(self, scope: Scope) -> WorkAgent | None: ...


def _agent(ctx: CallContext) -> WorkAgent:
    host = ctx.host
    found = host.work_agent(ctx.scope) if isinstance(host, WorkHost) else None
    if found is None:
        raise NoWorkAgent(
            f"{ctx.operation} needs the agent that runs session {ctx.scope.session}, and none "
            "runs it here; run it through comal -p or the TUI"
        )
    return found


def _run(args: WorkStepRunInput, ctx: CallContext) -> ToolOutput:
    return _agent(ctx).delegate(args, ctx)


def _wait(args: WorkStepWaitInput, ctx: CallContext) -> ToolOutput:
    return _agent(ctx).wait(args, ctx)


def _finish(args: FinishInput, ctx: CallContext) -> ToolOutput:
    return _agent(ctx).finish_call(ctx, args.accept_incomplete)


def work_operations() -> list[Operation]:
    """The board, the work steps, drafts and finish_call, as the one registry holds them."""
    model_only: frozenset[Surface] = frozenset({"model"})
    finish_on: frozenset[Surface] = frozenset({"model", "api"})
    # Delegating has no effect of its own: every call the child makes is judged and receipted
    # in its own session, under this session's policy. finish_call's checks are calls judged
    # on their own too. So the policy sees reads, and no mode keeps a session from finishing.
    return [
        *board_operations(),
        draft_operation(),
        Operation(
            "WorkStepRun",
            "Delegate one step to a sub-agent in a child session with its own context: the "
            "objective, optionally a subset of your tools, an engine, a window, max_turns, a "
            "token budget. It starts at once (several may run together); collect the result "
            "with WorkStepWait.",
            WorkStepRunInput,
            _run,
            effects=(Effect("read"),),
            audience="model",
            surfaces=model_only,
        ),
        Operation(
            "WorkStepWait",
            "Wait for work steps (default: every one not reported yet) and get each result: "
            "the child's final answer and its receipts, or why it is incomplete.",
            WorkStepWaitInput,
            _wait,
            effects=(Effect("read"),),
            audience="model",
            surfaces=model_only,
            inline_cap=15_000,
        ),
        Operation(
            FINISH,
            "Close the task: runs the configured checks and every board item's check; the "
            "session is finished only when all pass and every item is done. A work step that "
            "ended incomplete must be named in accept_incomplete with why the task holds "
            "without it. Call it alone, with your final answer as the text of the same reply.",
            FinishInput,
            _finish,
            effects=(Effect("read"),),
            surfaces=finish_on,
        ),
    ]


def ensure_work_operations(registry: Registry) -> None:
    """Add the work operations a registry lacks (a library caller's own registry)."""
    for op in work_operations():
        if op.name not in registry:
            registry.add(op)
