"""What a surface hands the agent factory (:class:`Flags`), and the factory's small errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..ops import SessionNotHeld  # raised by the runtime's guard as by a house's own
from ..providers import normalize_model_spec
from ._config import Config

__all__ = ["DEFAULT_MODELS", "Flags", "SessionNotHeld", "model_from_keys", "normalize_spec"]

# The model a new session takes when none is named anywhere, by the first provider key set.
DEFAULT_MODELS = (
    ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-6"),
    ("OPENAI_API_KEY", "openai:gpt-5.1"),
)


@dataclass(frozen=True, slots=True)
class Flags:
    """What a surface was given; ``None`` and empty mean "not given" (the environment, the
    configuration file and the defaults decide, in that order)."""

    model: str | None = None
    context_window: int | None = None
    engine: str | None = None
    mode: str | None = None
    effort: str | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    workspace: Path | None = None
    system: str | None = None
    max_turns: int | None = None
    tenant: str | None = None

    def overrides(self, config: Config) -> dict[str, Any]:
        return {
            "mode": self.mode or None,
            "max_turns": self.max_turns or None,
            "engine": self.engine or None,
            "effort": self.effort or None,
            "system_prompt": self.system or None,
            "tenant": self.tenant or None,
            "allow": [*config.allow, *self.allow],
            "deny": [*config.deny, *self.deny],
        }


def normalize_spec(spec: str) -> str:
    """The spec as the session stores it, in its scheme's form (a script path absolute, so a
    resume from elsewhere finds it)."""
    return normalize_model_spec(spec)


def model_from_keys(env: Mapping[str, str]) -> tuple[str, str] | None:
    """A default model when none is named (no ``--model``, ``COMAL_MODEL`` or configured
    ``model``): the first of :data:`DEFAULT_MODELS` whose key is set, and why, to be said once;
    ``None`` when no key is set."""
    for key, spec in DEFAULT_MODELS:
        if env.get(key, "").strip():
            return spec, (
                f"no model named: using {spec} because {key} is set (--model, COMAL_MODEL or "
                "model in the configuration choose another)"
            )
    return None
