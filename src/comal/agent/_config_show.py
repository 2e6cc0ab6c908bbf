"""``comal config show``: every effective setting and where it came from (CFG-1).

:func:`explain_config` reads the sources exactly as :meth:`Runtime.open` does — defaults, the
file, the environment, a surface's flags — and reports, per dotted key, the effective value,
its source (``default``, ``file``, ``env`` or ``flag``), the key it was written under when that
is another one (a per-agent entry ``agents.NAME.…``, an environment variable), the allowed range
and whether the key is operator-only (CFG-2).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..context import engine_names, get_engine
from ..ops import Policy
from ..tokens import CONTEXT_WINDOW_ENV
from ._cache import CacheConfig
from ._config import (
    ENV_KEYS,
    OPERATOR_ONLY,
    Config,
    SpendConfig,
    config_source,
    env_overrides,
    load_config,
)
from ._config_doc import allowed, describe_field

__all__ = ["FLAG_KEYS", "Setting", "explain_config"]

Source = Literal["default", "file", "env", "flag"]
# Flags a surface can give, by the configuration key they set.
FLAG_KEYS = (
    "model",
    "engine",
    "mode",
    "effort",
    "max_turns",
    "tenant",
    "system_prompt",
    "context_window",
)
_SIMPLE = (
    "model",
    "tenant",
    "agent",
    "mode",
    "allow",
    "ask",
    "deny",
    "max_turns",
    "effort",
    "system_prompt",
    "checks",
    "output_reserve",
    "plugins",
    "installed_plugins",
    "hooks_from",
)
_PER_AGENT = ("system_prompt", "max_turns", "checks")


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    value: Any
    source: Source
    origin: str | None = None  # where it was written, when not under ``key`` itself
    allowed: str | None = None
    operator_only: bool = False

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _written(data: Mapping[str, Any], *path: str) -> bool:
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _operator(key: str) -> bool:
    return key.split(".")[0] in OPERATOR_ONLY


def explain_config(
    path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    agent: str | None = None,
) -> tuple[Path, list[Setting]]:
    """The configuration file read and every effective setting, for ``agent`` (default: the
    configured agent). ``flags`` maps configuration keys (:data:`FLAG_KEYS`) to flag values;
    ``None`` is "not given"."""
    env = os.environ if env is None else env
    config = load_config(path, env=env)
    path, data = config_source(path, env)
    given = {k: v for k, v in (flags or {}).items() if v is not None and k in FLAG_KEYS}
    window_flag = given.pop("context_window", None)
    if given:
        config = config.merged(given)
    ex = _Explain(config, data, given, env, agent or config.agent)
    ex.simple()
    ex.window(window_flag)
    ex.engine()
    ex.spend_and_cache()
    ex.policy()
    ex.add("agents", sorted(config.agents), *ex.source_of("agents"), None)
    hooks = {
        event: [g.model_dump(mode="json", by_alias=True, exclude_defaults=True) for g in groups]
        for event, groups in config.hooks.items()
    }
    ex.add("hooks", hooks, *ex.source_of("hooks"), None)
    return path, ex.out


class _Explain:
    """The settings of one explanation, section by section, each with where it came from."""

    def __init__(
        self,
        config: Config,
        data: Mapping[str, Any],
        given: Mapping[str, Any],
        env: Mapping[str, str],
        name: str,
    ) -> None:
        self.config, self.data, self.given, self.env, self.name = config, data, given, env, name
        self.from_env = env_overrides(env)
        self.variables = {key: var for var, key in ENV_KEYS.items()} | {"tenant": "COMAL_TENANT"}
        self.profile = config.agents.get(name)
        self.out: list[Setting] = []

    def source_of(self, key: str) -> tuple[Source, str | None]:
        if key in self.given:
            return "flag", None
        if key in self.from_env:
            return "env", self.variables.get(key)
        if _written(self.data, *key.split(".")):
            return "file", None
        return "default", None

    def add(self, key: str, value: Any, src: Source, origin: str | None, rng: str | None) -> None:
        self.out.append(Setting(key, _plain(value), src, origin, rng, _operator(key)))

    def simple(self) -> None:
        config, profile, name = self.config, self.profile, self.name
        for key in _SIMPLE:
            value, (src, origin) = getattr(config, key), self.source_of(key)
            if key in _PER_AGENT and profile is not None and key in profile.model_fields_set:
                own = getattr(profile, key)
                if own is not None and src != "flag":
                    value, src, origin = own, "file", f"agents.{name}.{key}"
            self.add(key, value, src, origin, allowed(Config, [key]))

    def window(self, flag: object) -> None:
        """The minimum of the file's (or default none), the environment's and a flag's."""
        windows: list[tuple[int, Source, str | None]] = []
        if self.config.context_window is not None:
            windows.append((self.config.context_window, *self.source_of("context_window")))
        if self.env.get(CONTEXT_WINDOW_ENV, "").strip().isdigit():
            windows.append((int(self.env[CONTEXT_WINDOW_ENV]), "env", CONTEXT_WINDOW_ENV))
        if isinstance(flag, int):
            windows.append((flag, "flag", None))
        rng = allowed(Config, ["context_window"])
        if windows:
            self.add("context_window", *min(windows, key=lambda w: w[0]), rng)
        else:
            self.add("context_window", None, "default", None, rng)

    def engine(self) -> None:
        config, profile, name = self.config, self.profile, self.name
        engine_name = config.engine_name(name)
        src, origin = self.source_of("engine")
        if profile is not None and profile.engine and src != "flag":
            src, origin = "file", f"agents.{name}.engine"
        self.add("engine", engine_name, src, origin, "one of " + ", ".join(engine_names()))
        settings = config.engine_config(name)
        for field_name, info in get_engine(engine_name).config_type.model_fields.items():
            if info.exclude:
                continue
            src, origin = "default", None
            if profile is not None and field_name in profile.engine_settings:
                src, origin = "file", f"agents.{name}.engine_settings.{field_name}"
            elif engine_name == config.engine and field_name in config.engine_settings:
                src = "file"
            value = getattr(settings, field_name)
            self.add(f"engine_settings.{field_name}", value, src, origin, describe_field(info))

    def spend_and_cache(self) -> None:
        for field_name, info in SpendConfig.model_fields.items():
            key = f"spend.{field_name}"
            value = getattr(self.config.spend, field_name)
            self.add(key, value, *self.source_of(key), describe_field(info))
        cache = self.config.cache_config(self.name)
        for field_name, info in CacheConfig.model_fields.items():
            key = f"cache.{field_name}"
            src, origin = self.source_of(key)
            if self.profile is not None and field_name in self.profile.cache:
                src, origin = "file", f"agents.{self.name}.cache.{field_name}"
            self.add(key, getattr(cache, field_name), src, origin, describe_field(info))

    def policy(self) -> None:
        policy = Policy.from_config(self.config.policy_dict())
        for section, values in (("limits", policy.limits), ("sandbox", policy.sandbox)):
            written = self.data.get(section)
            for field_name, value in dataclasses.asdict(values).items():
                src: Source = "default"
                if _written(self.data, section, field_name) or isinstance(written, (str, bool)):
                    src = "file"
                self.add(f"{section}.{field_name}", value, src, None, None)
