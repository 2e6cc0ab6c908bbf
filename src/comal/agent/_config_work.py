"""The configuration's ``work`` section (operator-only): delegated work steps and the task's
budget (WRK-1, WRK-5). Kept apart from :mod:`._config` so that module stays one concern."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ._settings import TaskBudget, WorkSettings

__all__ = ["BudgetConfig", "WorkConfig"]

Spec = Annotated[str, Field(min_length=1, max_length=500)]


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int | None = Field(
        default=None,
        ge=1_000,
        le=10**12,
        description="Tokens the whole task may spend (the session and its work steps, every "
        "run); over it the session stops as budget_limited. null: no limit.",
    )
    turns: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Model requests the whole task may make (the session and its work steps). "
        "null: no limit.",
    )


class WorkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    parallel: int = Field(
        default=2, ge=1, le=16, description="Work steps (child sessions) that run at once."
    )
    models: list[Spec] = Field(
        default_factory=list,
        max_length=50,
        description="Model specs a WorkStepRun may name for its child besides the session's "
        "own (which a child uses by default).",
    )
    max_turns: int = Field(
        default=20, ge=1, le=10_000, description="A work step's model turns: default and ceiling."
    )
    budget: BudgetConfig = Field(default_factory=BudgetConfig)

    def settings(self) -> WorkSettings:
        return WorkSettings(self.parallel, tuple(self.models), self.max_turns)

    def task_budget(self) -> TaskBudget:
        return TaskBudget(self.budget.tokens, self.budget.turns)
