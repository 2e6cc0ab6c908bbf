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
    from_env = env_overrides(env)
    variables = {key: var for var, key in ENV_KEYS.items()} | {"tenant": "COMAL_TENANT"}
    name = agent or config.agent
    profile = config.agents.get(name)
    out: list[Setting] = []

    def source_of(key: str) -> tuple[Source, str | None]:
        if key in given:
            return "flag", None
        if key in from_env:
            return "env", variables.get(key)
        if _written(data, *key.split(".")):
            return "file", None
        return "default", None

    def add(key: str, value: Any, src: Source, origin: str | None, rng: str | None) -> None:
        out.append(Setting(key, _plain(value), src, origin, rng, _operator(key)))

    for key in _SIMPLE:
        value, (src, origin) = getattr(config, key), source_of(key)
        if key in _PER_AGENT and profile is not None and key in profile.model_fields_set:
            own = getattr(profile, key)
            if own is not None and src != "flag":
                value, src, origin = own, "file", f"agents.{name}.{key}"
        add(key, value, src, origin, allowed(Config, [key]))

    # The window: the minimum of the file's (or default none), the environment's and a flag's.
    windows: list[tuple[int, Source, str | None]] = []
    if config.context_window is not None:
        windows.append((config.context_window, *source_of("context_window")))
    if env.get(CONTEXT_WINDOW_ENV, "").strip().isdigit():
        windows.append((int(env[CONTEXT_WINDOW_ENV]), "env", CONTEXT_WINDOW_ENV))
    if isinstance(window_flag, int):
        windows.append((window_flag, "flag", None))
    rng = allowed(Config, ["context_window"])
    if windows:
        add("context_window", *min(windows, key=lambda w: w[0]), rng)
    else:
        add("context_window", None, "default", None, rng)

    engine_name = config.engine_name(name)
    src, origin = source_of("engine")
    if profile is not None and profile.engine and src != "flag":
        src, origin = "file", f"agents.{name}.engine"
    add("engine", engine_name, src, origin, "one of " + ", ".join(engine_names()))
    engine = get_engine(engine_name)
    settings = config.engine_config(name)
    for field_name, info in engine.config_type.model_fields.items():
        if info.exclude:
            continue
        key = f"engine_settings.{field_name}"
        src, origin = "default", None
        if profile is not None and field_name in profile.engine_settings:
            src, origin = "file", f"agents.{name}.engine_settings.{field_name}"
        elif engine_name == config.engine and field_name in config.engine_settings:
            src = "file"
        add(key, getattr(settings, field_name), src, origin, describe_field(info))

    for field_name, info in SpendConfig.model_fields.items():
        key = f"spend.{field_name}"
        add(key, getattr(config.spend, field_name), *source_of(key), describe_field(info))

    cache = config.cache_config(name)
    for field_name, info in CacheConfig.model_fields.items():
        key = f"cache.{field_name}"
        src, origin = source_of(key)
        if profile is not None and field_name in profile.cache:
            src, origin = "file", f"agents.{name}.cache.{field_name}"
        add(key, getattr(cache, field_name), src, origin, describe_field(info))

    policy = Policy.from_config(config.policy_dict())
    for section, values in (("limits", policy.limits), ("sandbox", policy.sandbox)):
        written = data.get(section)
        for field_name, value in dataclasses.asdict(values).items():
            key = f"{section}.{field_name}"
            src = "default"
            if _written(data, section, field_name) or isinstance(written, (str, bool)):
                src = "file"
            add(key, value, src, None, None)
    add("agents", sorted(config.agents), *source_of("agents"), None)
    return path, out
