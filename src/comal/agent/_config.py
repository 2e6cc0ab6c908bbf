"""Configuration (CFG-1, CFG-2): one file, validated with ranges, merged with env and flags.

The file is ``config.yaml`` in the per-user configuration directory (platformdirs
``user_config_dir("comal")``, e.g. ``~/.config/comal/``) when PyYAML is installed, else
``config.json`` there; ``COMAL_CONFIG`` names another file. Every key is optional — the defaults
work — and unknown keys are refused, so a typo does not silently change nothing::

    model: anthropic:claude-sonnet-4-6
    mode: ask                      # read-only | ask | trusted
    allow: ["Bash(git *)", "Write(src/**)"]
    deny: ["Bash(rm *)"]
    max_turns: 50
    checks: ["pytest -q"]          # must pass before a session is marked finished (RES-5)
    context_window: 128000         # operator-only: combined with the model's by minimum
    spend: {execution: 2000000, hour: 10000000, day: 100000000}    # operator-only
    engine: limit                  # operator-only: the context engine (comal.context registry)
    engine_settings: {keep_recent_results: 5}   # operator-only: that engine's settings
    agents:                        # per-agent settings, by agent name
      reviewer: {engine: {target_ratio: 0.5}, max_turns: 20}

Precedence: defaults < file < environment (``COMAL_MODEL``, ``COMAL_MODE``, ``COMAL_MAX_TURNS``,
``COMAL_TENANT``; ``COMAL_CONTEXT_WINDOW`` joins the window minimum) < command-line flags.

Operator-only settings (:data:`OPERATOR_ONLY`: windows, output reserve, engine, caps) come only
from these sources, which the model cannot reach: the configuration is read once when the
process starts into frozen values, no operation in the model's catalog changes any of them, and
the policy denies the model's Write/Edit of the configuration file and shell commands naming its
directory (CFG-2).
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..context import engine_config, engine_names, get_engine
from ..errors import InputError
from ..ops import Mode, Policy, Rule, Workspace
from ..tokens import resolve_window
from ._settings import DEFAULT_SYSTEM, AgentSettings
from ._spend import SpendCaps

__all__ = [
    "CONFIG_ENV",
    "OPERATOR_ONLY",
    "AgentProfile",
    "Config",
    "SpendConfig",
    "config_path",
    "load_config",
    "policy_from_config",
    "settings_from_config",
]

CONFIG_ENV = "COMAL_CONFIG"
OPERATOR_ONLY = frozenset(
    {"context_window", "output_reserve", "engine", "engine_settings", "spend"}
)
_ENV = {"COMAL_MODEL": "model", "COMAL_MODE": "mode", "COMAL_MAX_TURNS": "max_turns"}
_ENV_TENANT = "COMAL_TENANT"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpendConfig(_Strict):
    """TOK-6 caps in tokens."""

    execution: int = Field(default=2_000_000, ge=1_000, le=10**11)
    hour: int = Field(default=10_000_000, ge=1_000, le=10**12)
    day: int = Field(default=100_000_000, ge=1_000, le=10**13)

    def caps(self) -> SpendCaps:
        return SpendCaps(self.execution, self.hour, self.day)


class AgentProfile(_Strict):
    """Per-agent settings (CFG-1), applied over the top-level ones for that agent name."""

    engine: dict[str, Any] = Field(default_factory=dict)
    system_prompt: str | None = Field(default=None, max_length=200_000)
    max_turns: int | None = Field(default=None, ge=1, le=10_000)
    checks: list[str] | None = None


class Config(_Strict):
    model: str | None = Field(default=None, min_length=1)
    tenant: str = Field(default="local", min_length=1, max_length=200)
    agent: str = Field(default="comal", min_length=1, max_length=200)
    mode: Mode = "ask"
    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    limits: dict[str, Any] = Field(default_factory=dict)
    max_turns: int = Field(default=50, ge=1, le=10_000)
    effort: str | None = Field(default=None, min_length=1, max_length=40)
    system_prompt: str | None = Field(default=None, max_length=200_000)
    checks: list[str] = Field(default_factory=list)
    context_window: int | None = Field(default=None, ge=1_024, le=10_000_000)
    output_reserve: int | None = Field(default=None, ge=256, le=1_000_000)
    engine: str = Field(default="limit", min_length=1, max_length=40)
    engine_settings: dict[str, Any] = Field(default_factory=dict)
    spend: SpendConfig = Field(default_factory=SpendConfig)
    agents: dict[str, AgentProfile] = Field(default_factory=dict)

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        if value not in engine_names():
            raise ValueError(
                f"unknown engine {value!r}; this comal has: {', '.join(engine_names())}"
            )
        return value

    @model_validator(mode="after")
    def _engines_valid(self) -> Config:
        # Engine settings are checked now, with the engine's own ranges, not at the first turn.
        for profile in (None, *self.agents):
            self.engine_config(profile)
        Policy.from_config(self.policy_dict())
        return self

    def engine_config(self, agent: str | None = None) -> BaseModel:
        """The settings of the configured engine for ``agent``: the top-level
        ``engine_settings`` with the agent's ``engine`` entries over them, validated with
        that engine's own ranges."""
        profile = self.agents.get(agent) if agent is not None else None
        merged = {**self.engine_settings, **(profile.engine if profile is not None else {})}
        return engine_config(get_engine(self.engine), merged)

    def policy_dict(self) -> dict[str, Any]:
        d = {"mode": self.mode, "allow": self.allow, "ask": self.ask, "deny": self.deny}
        return d | {"limits": self.limits}

    def merged(self, overrides: Mapping[str, Any]) -> Config:
        """This configuration with ``overrides`` (``None`` values skipped) validated on top."""
        data = self.model_dump(exclude_defaults=True)
        data |= {k: v for k, v in overrides.items() if v is not None}
        return _validate(data, "overrides")


def _validate(data: Any, where: str) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise InputError(
            f"invalid configuration: {err['msg']} ({exc.error_count()} problem(s)); fix the "
            "value or remove the key to use the default",
            path=where,
            field=field,
        ) from exc
    except InputError as exc:  # a permission rule that does not parse
        raise InputError(exc.reason, path=where, field=exc.field) from exc


def _yaml() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        return None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The configuration file to read (it may not exist)."""
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    base = Path(user_config_dir("comal", appauthor=False))
    yaml_file = base / "config.yaml"
    if _yaml() is not None and yaml_file.exists():
        return yaml_file
    return base / "config.json"


def _read(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        yaml = _yaml()
        if yaml is None:
            raise InputError(
                "PyYAML is not installed, so YAML configuration cannot be read; write the "
                "same keys as JSON in config.json, or install pyyaml",
                path=str(path),
            )
        try:
            data = yaml.safe_load(text)
        except Exception as exc:  # PyYAML's errors share no importable base here
            raise InputError(f"not valid YAML: {exc}", path=str(path)) from exc
    else:
        try:
            data = json.loads(text) if text.strip() else {}
        except ValueError as exc:
            raise InputError(f"not valid JSON: {exc}", path=str(path)) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("the configuration must be a mapping of keys", path=str(path))
    return data


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Defaults < the file (when it exists) < the environment."""
    env = os.environ if env is None else env
    path = path if path is not None else config_path(env)
    data = _read(path) if path.exists() else {}
    config = _validate(data, str(path))
    overrides: dict[str, Any] = {key: env[var] for var, key in _ENV.items() if env.get(var)}
    if env.get(_ENV_TENANT):
        overrides["tenant"] = env[_ENV_TENANT]
    return config.merged(overrides) if overrides else config


def settings_from_config(
    config: Config, model: str, *, agent: str | None = None, context_window: int | None = None
) -> AgentSettings:
    """The frozen settings one agent runs with; ``context_window`` (a flag) joins the
    configured window and the model's by minimum (TOK-3)."""
    name = agent or config.agent
    profile = config.agents.get(name, AgentProfile())
    windows = [w for w in (config.context_window, context_window) if w is not None]
    checks = profile.checks if profile.checks is not None else config.checks
    return AgentSettings(
        model=model,
        window=resolve_window(model, override=min(windows) if windows else None),
        system=profile.system_prompt or config.system_prompt or DEFAULT_SYSTEM,
        effort=config.effort,
        max_turns=profile.max_turns or config.max_turns,
        output_reserve=config.output_reserve,
        engine=config.engine_config(name),
        engine_name=config.engine,
        spend=config.spend.caps(),
        checks=tuple(checks),
    )


def policy_from_config(
    config: Config, *, workspace: Workspace | None, protect: Path | None = None
) -> Policy:
    """The permission policy, with the configuration file guarded from the model (CFG-2)."""
    policy = Policy.from_config(config.policy_dict())
    if protect is None:
        return policy
    folder = protect.expanduser().resolve().parent
    rules = [Rule("Bash", f"*{folder}*", "deny")]
    home = Path.home()
    if folder.is_relative_to(home):
        rules.append(Rule("Bash", f"*~/{folder.relative_to(home).as_posix()}*", "deny"))
    if workspace is not None and workspace.contains(folder):
        rel = workspace.rel(folder)
        pattern = "config.*" if rel == "." else f"{rel}/config.*"
        rules += [Rule(op, pattern, "deny") for op in ("Write", "Edit")]
    return policy.with_rules(*rules)
