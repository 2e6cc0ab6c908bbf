"""The configuration's smaller sections and value types (the file's reading is in ``_config``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..context import engine_names
from ._spend import SpendCaps

__all__ = [
    "AgentProfile",
    "Command",
    "InstalledMode",
    "ModuleName",
    "OutputEscalation",
    "RuleText",
    "SpendConfig",
    "Strict",
    "known_engine",
]

Command = Annotated[str, Field(min_length=1, max_length=10_000)]
RuleText = Annotated[str, Field(min_length=1, max_length=2_000)]
# Which installed plugins are enabled: all, or only those plugins: names (docs/plugins.md).
InstalledMode = Literal["all", "listed"]
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$", max_length=200)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpendConfig(Strict):
    """TOK-6 caps in tokens."""

    execution: int = Field(
        default=2_000_000, ge=1_000, le=10**11, description="Tokens one run may spend."
    )
    hour: int = Field(
        default=10_000_000, ge=1_000, le=10**12, description="Tokens per rolling hour."
    )
    day: int = Field(
        default=100_000_000, ge=1_000, le=10**13, description="Tokens per rolling day."
    )

    def caps(self) -> SpendCaps:
        return SpendCaps(self.execution, self.hour, self.day)


class OutputEscalation(Strict):
    """MEM-3: after a compaction, the next request may ask for more output."""

    enabled: bool = Field(
        default=True,
        description="Raise the max output of the first request after a compaction (within the "
        "window's room and the model's output limit).",
    )
    max_tokens: int = Field(
        default=32_768,
        ge=4_096,
        le=128_000,
        description="The most output tokens an escalated request asks for.",
    )

    def ceiling(self) -> int | None:
        return self.max_tokens if self.enabled else None


def known_engine(value: str | None) -> str | None:
    if value is not None and value not in engine_names():
        raise ValueError(f"unknown engine {value!r}; this comal has: {', '.join(engine_names())}")
    return value


class AgentProfile(Strict):
    """Per-agent settings (CFG-1), applied over the top-level ones for that agent name."""

    engine: str | None = Field(
        default=None,
        min_length=1,
        max_length=40,
        description="The context engine of this agent (operator-only); null: the top-level one.",
    )
    engine_settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Settings of this agent's engine (operator-only), over the top-level "
        "engine_settings when it runs the top-level engine.",
    )
    system_prompt: str | None = Field(
        default=None, max_length=200_000, description="Replaces the top-level system_prompt."
    )
    max_turns: int | None = Field(
        default=None, ge=1, le=10_000, description="Replaces the top-level max_turns."
    )
    checks: list[Command] | None = Field(
        default=None, max_length=100, description="Replaces the top-level checks."
    )
    cache: dict[str, Any] = Field(
        default_factory=dict,
        description="Prompt-cache settings of this agent (operator-only), merged over the "
        "top-level cache section key by key.",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_engine(cls, data: Any) -> Any:
        # Before engine choice per agent, ``engine`` held the agent's engine settings.
        if isinstance(data, Mapping) and isinstance(data.get("engine"), Mapping):
            if "engine_settings" in data:
                raise ValueError(
                    "engine is a mapping of settings and engine_settings is given too; "
                    "put the settings in engine_settings and name the engine in engine"
                )
            settings = dict(data["engine"])
            data = {k: v for k, v in data.items() if k != "engine"} | {"engine_settings": settings}
        return data

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str | None) -> str | None:
        return known_engine(value)
