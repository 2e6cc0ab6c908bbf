"""Configuration (CFG-1, CFG-2): one file, validated with ranges, merged with env and flags.

The file is ``config.yaml`` in the per-user configuration directory (platformdirs
``user_config_dir("comal")``, e.g. ``~/.config/comal/``) when PyYAML is installed, else
``config.toml`` when there is one, else ``config.json`` there; ``COMAL_CONFIG`` names another
file (its suffix says the format). A file named that way, or by a flag, must exist
(:class:`~comal.agent.ConfigNotFound`); only the per-user default may be absent. Every key
is optional — the defaults work — and unknown keys are refused, so a typo does not silently
change nothing::

    model: anthropic:claude-sonnet-4-6
    mode: ask                      # read-only | ask | trusted
    allow: ["Bash(git *)", "Write(src/**)"]
    deny: ["Bash(rm *)"]
    max_turns: 50
    checks: ["pytest -q"]          # must pass before a session is marked finished (RES-5)
    context_window: 128000         # operator-only: combined with the model's by minimum
    output_escalation: {enabled: true, max_tokens: 32768}   # operator-only (MEM-3)
    spend: {execution: 2000000, hour: 10000000, day: 100000000}    # operator-only
    engine: limit                  # operator-only: the context engine (comal.context registry)
    engine_settings: {keep_recent_results: 5}   # operator-only: that engine's settings
    cache: {promote_after_turns: 3, deferral_threshold: 0.1}      # operator-only (CCH-3/4)
    agents:                        # per-agent settings, by agent name
      reviewer: {engine: limit, engine_settings: {target_ratio: 0.5}, max_turns: 20}
    plugins: [comal_wordcount]     # operator-only: modules enabled as plugins (docs/plugins.md)
    installed_plugins: listed      # operator-only: only the installed plugins plugins: names
    plugin_settings: {web_fetch: {allowed_hosts: [docs.python.org]}}   # operator-only
    work: {parallel: 2, budget: {tokens: 500000}}   # operator-only: work steps, task budget
    serve: {allowed_hosts: [comal.internal]}   # operator-only: comal serve's guards and limits
    hooks: {PreToolUse: [{matcher: Bash, hooks: [{type: command, command: ./check.sh}]}]}
    hooks_from: [.claude/settings.json]   # operator-only: Claude Code's hooks, unchanged

Every value is checked with its range when the file is read (engine settings with the chosen
engine's own ranges); an error names the file, the key and the allowed range.
``docs/configuration.md`` is the reference, generated from these models
(:func:`~comal.agent._config_reference.configuration_reference`).

Precedence: defaults < file < environment (``COMAL_MODEL``, ``COMAL_MODE``, ``COMAL_MAX_TURNS``,
``COMAL_TENANT``; ``COMAL_CONTEXT_WINDOW`` joins the window minimum) < command-line flags.

Operator-only settings (:data:`OPERATOR_ONLY`: windows, output reserve and escalation,
engine and its settings, caps and limits, the sandbox, the cache, MCP servers, plugins and
their settings, serve, work steps and the task's budget, hooks) come only from these sources, which
the model cannot reach: the configuration is read once when the process starts into frozen
values, no operation in the model's catalog changes any of them, and the policy denies the
model's Write/Edit of the configuration file and shell commands naming its directory, while
the OS sandbox masks the file from Bash (CFG-2).
"""

from __future__ import annotations

import importlib
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from platformdirs import user_config_dir
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .._config_file import CONFIG_ENV, ConfigNotFound, named_config
from ..context import engine_config, get_engine
from ..errors import InputError
from ..hooks import HooksSection
from ..ops import McpServerConfig, Mode, Policy, Rule, Workspace
from ..ops._mcp_config import SERVER_NAME
from ..tokens import resolve_window
from ._cache import CacheConfig
from ._config_doc import allowed
from ._config_hooks import HOOKS_FIELD, HOOKS_FROM_FIELD, HooksFile
from ._config_parts import (
    AgentProfile,
    Command,
    InstalledMode,
    ModuleName,
    OutputEscalation,
    RuleText,
    SpendConfig,
    Strict,
    known_engine,
)
from ._config_work import WorkConfig
from ._serve_settings import ServeSettings
from ._settings import DEFAULT_SYSTEM, AgentSettings

__all__ = [
    "CONFIG_ENV",
    "OPERATOR_ONLY",
    "AgentProfile",
    "Config",
    "SpendConfig",
    "check_config",
    "config_path",
    "config_source",
    "load_config",
    "policy_from_config",
    "read_config_file",
    "settings_from_config",
]

OPERATOR_ONLY = frozenset(
    {
        "context_window",
        "output_reserve",
        "output_escalation",
        "engine",
        "engine_settings",
        "spend",
        "limits",
        "sandbox",
        "cache",
        "mcp_servers",
        "plugins",
        "installed_plugins",
        "plugin_settings",
        "serve",
        "work",
        "hooks",
        "hooks_from",
    }
)
ENV_KEYS = {"COMAL_MODEL": "model", "COMAL_MODE": "mode", "COMAL_MAX_TURNS": "max_turns"}
_ENV_TENANT = "COMAL_TENANT"
_SUFFIXES = (".yaml", ".yml", ".toml", ".json")


class Config(Strict):
    model: str | None = Field(
        default=None,
        min_length=1,
        description="provider:model (anthropic:…, openai:…, openai-responses:…, "
        "openai-compat:URL#model) or script:PATH.",
    )
    tenant: str = Field(default="local", min_length=1, max_length=200, description="Tenant.")
    agent: str = Field(
        default="comal", min_length=1, max_length=200, description="Agent name of new sessions."
    )
    mode: Mode = Field(default="ask", description="Permission mode new sessions start in.")
    allow: list[RuleText] = Field(
        default_factory=list, max_length=1_000, description="Allow rules, e.g. Bash(git *)."
    )
    ask: list[RuleText] = Field(
        default_factory=list, max_length=1_000, description="Rules that ask a human first."
    )
    deny: list[RuleText] = Field(
        default_factory=list, max_length=1_000, description="Deny rules (they win)."
    )
    limits: dict[str, Any] = Field(
        default_factory=dict,
        description="Time limits and the output cap (operator-only; see the limits section).",
    )
    sandbox: dict[str, Any] | bool | str = Field(
        default_factory=dict,
        description="What the OS sandbox allows Bash (operator-only; see the sandbox section); "
        "off opts out.",
    )
    mcp_servers: dict[Annotated[str, Field(pattern=f"^{SERVER_NAME}$")], McpServerConfig] = Field(
        default_factory=dict,
        max_length=64,
        description="MCP servers (stdio) the agent starts in the OS sandbox, by name: command, "
        "args, env, cwd, network (off unless true), readable_paths, effects, start_timeout "
        "(seconds to answer the handshake, and again to list its tools; default 30, at most "
        "600) (operator-only). A server that does not start is left out, said at start.",
    )
    max_turns: int = Field(default=50, ge=1, le=10_000, description="Model turns per run.")
    effort: str | None = Field(
        default=None, min_length=1, max_length=40, description="Reasoning effort (low, high…)."
    )
    system_prompt: str | None = Field(
        default=None, max_length=200_000, description="Replaces the default system prompt."
    )
    checks: list[Command] = Field(
        default_factory=list,
        max_length=100,
        description="Commands that must pass before a session is marked finished (RES-5).",
    )
    context_window: int | None = Field(
        default=None,
        ge=1_024,
        le=10_000_000,
        description="Caps the window (minimum with the model's; operator-only).",
    )
    output_reserve: int | None = Field(
        default=None,
        ge=256,
        le=1_000_000,
        description="Output tokens reserved per request (operator-only); null: the budget's.",
    )
    output_escalation: OutputEscalation = Field(
        default_factory=OutputEscalation,
        description="After a compaction, the next request may write more (operator-only; MEM-3).",
    )
    engine: str = Field(
        default="limit",
        min_length=1,
        max_length=40,
        description="The context engine (operator-only): one of the comal.context registry.",
    )
    engine_settings: dict[str, Any] = Field(
        default_factory=dict,
        description="That engine's settings (operator-only; see the engine sections).",
    )
    spend: SpendConfig = Field(default_factory=SpendConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    agents: dict[str, AgentProfile] = Field(
        default_factory=dict, description="Per-agent settings, by agent name."
    )
    plugins: list[ModuleName] = Field(
        default_factory=list,
        max_length=100,
        description="Python modules enabled as plugins when the configuration is loaded, after "
        "the installed entry points (operator-only; see docs/plugins.md).",
    )
    installed_plugins: InstalledMode = Field(
        default="all",
        description="Which installed plugins (entry points of the group comal.plugins) are "
        "enabled: all of them, or only those plugins: names by module or entry point name "
        "(listed); COMAL_INSTALLED_PLUGINS=listed does the same, the stricter of the two wins "
        "(operator-only; see docs/plugins.md).",
    )
    plugin_settings: dict[ModuleName, dict[str, Any]] = Field(
        default_factory=dict,
        description="Each plugin's own settings, by the section it reads (web_fetch: the hosts "
        "WebFetch may reach, see its section below; chrome: the browser plugin's origins, "
        "targets and tests, see docs/browser.md), checked with that plugin's model when the "
        "configuration is read (operator-only).",
    )
    work: WorkConfig = Field(default_factory=WorkConfig)
    hooks: HooksSection = HOOKS_FIELD
    hooks_from: list[HooksFile] = HOOKS_FROM_FIELD

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: str) -> str:
        known_engine(value)
        return value

    @model_validator(mode="after")
    def _plugin_settings_valid(self) -> Config:
        # Each section belongs to an enabled plugin and is checked with its model now, so a
        # typo or a bad value is refused when the file is read, not at the first call.
        if not self.plugin_settings:
            return self
        from ..plugins import settings_sections

        sections = settings_sections()
        for section, values in self.plugin_settings.items():
            spec = sections.get(section)
            if spec is None:
                known = ", ".join(sorted(sections)) or "none"
                raise InputError(
                    f"no enabled plugin reads plugin_settings.{section} (sections read: "
                    f"{known}); enable its plugin under plugins: or fix the name",
                    field=f"plugin_settings.{section}",
                )
            try:
                spec.model.model_validate(values)
            except ValidationError as exc:
                err = exc.errors()[0]
                key = ".".join(str(p) for p in err["loc"])
                raise InputError(
                    f"invalid plugin setting: {err['msg']}; fix the value",
                    field=f"plugin_settings.{section}" + (f".{key}" if key else ""),
                ) from exc
        return self

    @model_validator(mode="after")
    def _engines_valid(self) -> Config:
        # Engine and cache settings are checked now, with their own ranges, not at the first
        # turn; each error names the key under which it was written.
        for agent in (None, *self.agents):
            self.engine_config(agent)
            self.cache_config(agent)
        Policy.from_config(self.policy_dict())
        return self

    def _profile(self, agent: str | None) -> AgentProfile | None:
        return self.agents.get(agent) if agent is not None else None

    def engine_name(self, agent: str | None = None) -> str:
        """The engine ``agent`` runs: its own choice, else the top-level one."""
        profile = self._profile(agent)
        return profile.engine if profile is not None and profile.engine else self.engine

    def engine_config(self, agent: str | None = None, *, engine: str | None = None) -> BaseModel:
        """The settings of ``agent``'s engine: the top-level ``engine_settings`` (when it runs
        the top-level engine) with the agent's ``engine_settings`` over them, validated with
        that engine's own ranges. ``engine`` names another one (a resumed session's own,
        DRV-4): only the settings written for that engine apply, else its defaults."""
        profile = self._profile(agent)
        runs = self.engine_name(agent)
        name = engine or runs
        merged = dict(self.engine_settings) if name == self.engine else {}
        where = "engine_settings"
        if profile is not None and profile.engine_settings and name == runs:
            merged |= profile.engine_settings
            where = f"agents.{agent}.engine_settings"
        found = get_engine(name)
        try:
            return engine_config(found, merged)
        except InputError as exc:
            key = exc.field or ""
            own = f"{where}.{key}" if key in (profile.engine_settings if profile else {}) else None
            field = own or (f"engine_settings.{key}" if key in self.engine_settings else where)
            rng = allowed(found.config_type, key.split(".")) if key else None
            raise InputError(_with_range(exc.reason, rng), field=field) from exc

    def cache_config(self, agent: str | None = None) -> CacheConfig:
        """The prompt-cache settings of ``agent``: its ``cache`` entries over the top level's."""
        profile = self._profile(agent)
        if profile is None or not profile.cache:
            return self.cache
        try:
            return CacheConfig.model_validate(self.cache.model_dump() | profile.cache)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            rng = allowed(CacheConfig, err["loc"])
            raise InputError(
                f"invalid cache setting: {err['msg']}" + (f" (allowed: {rng})" if rng else ""),
                field=f"agents.{agent}.cache.{key}",
            ) from exc

    def policy_dict(self) -> dict[str, Any]:
        d = {"mode": self.mode, "allow": self.allow, "ask": self.ask, "deny": self.deny}
        return d | {"limits": self.limits, "sandbox": self.sandbox}

    def merged(self, overrides: Mapping[str, Any]) -> Config:
        """This configuration with ``overrides`` (``None`` values skipped) validated on top."""
        data = self.model_dump(exclude_defaults=True)
        data |= {k: v for k, v in overrides.items() if v is not None}
        return _validate(data, "overrides")


def _with_range(reason: str, rng: str | None) -> str:
    """``reason`` with the allowed range stated before its advice."""
    if not rng:
        return reason
    head, sep, advice = reason.partition("; fix the value")
    return f"{head} (allowed: {rng}){sep}{advice}"


class _PluginKeys(BaseModel):
    model_config = ConfigDict(extra="ignore")
    plugins: list[ModuleName] = Field(default_factory=list, max_length=100)
    installed_plugins: InstalledMode = "all"


def _enable_plugins(data: Any, where: str) -> None:
    """Enable what the configuration says of plugins — its ``installed_plugins`` mode and the
    modules ``plugins:`` names — before the rest is validated: an engine a plugin adds may be
    the one the file chooses. A malformed value is left to the validation."""
    given = data if isinstance(data, Mapping) else {}
    try:
        # Only these two keys: the whole model's checks read the registries, which would
        # settle the installed plugins before the file's mode is known.
        checked = _PluginKeys.model_validate(given)
    except ValidationError:
        return
    from ..plugins import enable_plugins

    enable_plugins(checked.plugins, where=where, installed=checked.installed_plugins)


def _validate(data: Any, where: str) -> Config:
    _enable_plugins(data, where)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        field = ".".join(str(p) for p in loc) or None
        rng = allowed(Config, loc)
        more = f"; {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
        raise InputError(
            f"invalid configuration: {err['msg']}"
            + (f" (allowed: {rng})" if rng else "")
            + f"{more}; fix the value or remove the key to use the default",
            path=where,
            field=field,
        ) from exc
    except InputError as exc:  # engine or cache settings, or a permission rule that fails
        raise InputError(exc.reason, path=where, field=exc.field) from exc


def _yaml() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        return None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The configuration file to read: the one ``COMAL_CONFIG`` names, which must exist
    (:class:`~comal.agent.ConfigNotFound` otherwise), else the per-user default, which may
    not."""
    env = os.environ if env is None else env
    named = named_config(env=env)
    if named is not None:
        return named
    base = Path(user_config_dir("comal", appauthor=False))
    yaml_file = base / "config.yaml"
    if _yaml() is not None and yaml_file.exists():
        return yaml_file
    toml_file = base / "config.toml"
    if toml_file.exists():
        return toml_file
    return base / "config.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the configuration: {exc}", path=str(path)) from exc
    data: Any
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
            line = getattr(getattr(exc, "problem_mark", None), "line", None)
            raise InputError(
                f"not valid YAML: {exc}", path=str(path), line=None if line is None else line + 1
            ) from exc
    elif path.suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"not valid TOML: {exc}", path=str(path)) from exc
    else:
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg}", path=str(path), line=exc.lineno) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("the configuration must be a mapping of keys", path=str(path))
    return data


def read_config_file(path: Path) -> dict[str, Any]:
    """The keys written in ``path`` as they are (YAML, TOML or JSON by suffix), unvalidated."""
    return _read(path)


def check_config(path: Path) -> Config:
    """``comal config check FILE``: the file alone validated (no environment), or the coded
    error naming the file, the key and the allowed range."""
    if not path.is_file():
        raise ConfigNotFound("no such configuration file to check; fix the path", path=str(path))
    return _validate(_read(path), str(path))


def env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    """The configuration keys the environment sets."""
    overrides: dict[str, Any] = {key: env[var] for var, key in ENV_KEYS.items() if env.get(var)}
    if env.get(_ENV_TENANT):
        overrides["tenant"] = env[_ENV_TENANT]
    return overrides


def config_source(
    path: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, dict[str, Any]]:
    """The file to read and its keys: ``path`` (a flag) or ``COMAL_CONFIG``, which must exist,
    else the per-user default, read only when it exists."""
    named = named_config(path, env)
    if named is not None:
        return named, _read(named)
    default = config_path(env)
    return default, _read(default) if default.exists() else {}


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> Config:
    """Defaults < the file < the environment. A file named by ``path`` or ``COMAL_CONFIG``
    must exist; only the per-user default may be absent (see :mod:`comal._config_file`)."""
    env = os.environ if env is None else env
    path, data = config_source(path, env)
    config = _validate(data, str(path))
    overrides = env_overrides(env)
    if not overrides:
        return config
    try:
        return config.merged(overrides)
    except InputError as exc:
        variable = next((v for v, k in ENV_KEYS.items() if k == exc.field), exc.field)
        raise InputError(exc.reason, path="environment", field=variable) from exc


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
        output_escalation=config.output_escalation.ceiling(),
        engine=config.engine_config(name),
        engine_name=config.engine_name(name),
        spend=config.spend.caps(),
        checks=tuple(checks),
        cache=config.cache_config(name),
        budget=config.work.task_budget(),
        work=config.work.settings(),
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
        # The file itself, whatever its name (COMAL_CONFIG may name any), and its siblings.
        name = protect.expanduser().resolve().name
        for pattern in {f"{rel}/{name}", f"{rel}/config.*"}:
            pattern = pattern.removeprefix("./")
            rules += [Rule(op, pattern, "deny") for op in ("Write", "Edit")]
    return policy.with_rules(*rules)
