"""Model limits and the effective context window (TOK-3).

The built-in catalog is ``models.json`` beside this module: each model's advertised context
window and output cap, with the page the numbers came from. A user file in the same format —
``COMAL_MODELS_FILE``, else ``models.json`` in the platform config folder
(``~/.config/comal/models.json`` on Linux) — adds models and overrides built-ins by name.

The effective window is the *minimum* of what is known: the model's window, an explicit
``--context-window`` and ``COMAL_CONTEXT_WINDOW``. An explicit value can only shrink a known
model's window. With neither a known model nor an explicit value, :data:`FALLBACK_WINDOW`.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import platformdirs

from ..errors import InputError

__all__ = [
    "CONTEXT_WINDOW_ENV",
    "FALLBACK_WINDOW",
    "MODELS_FILE_ENV",
    "ModelInfo",
    "WindowResolution",
    "load_catalog",
    "lookup_model",
    "resolve_window",
    "user_models_file",
]

FALLBACK_WINDOW = 45_000
CONTEXT_WINDOW_ENV = "COMAL_CONTEXT_WINDOW"
MODELS_FILE_ENV = "COMAL_MODELS_FILE"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Advertised limits of one model. ``context_window`` covers input and output together;
    ``max_input`` is a separate input cap where the provider has one (GPT-5: 272,000)."""

    name: str
    provider: str
    context_window: int
    max_output: int | None
    max_input: int | None = None


@dataclass(frozen=True, slots=True)
class WindowResolution:
    """The effective window and where it came from.

    ``source`` names what set the window: ``catalog:<model>``, ``user-catalog:<model>``,
    ``override`` (an explicit ``--context-window``), ``env:COMAL_CONTEXT_WINDOW`` or
    ``fallback``.
    """

    window: int
    max_output: int | None
    source: str
    max_input: int | None = None
    model: ModelInfo | None = None


def _positive(value: Any, *, path: str, field: str, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(
            f"expected a positive whole number of tokens, got {value!r}; fix or remove the entry",
            path=path,
            field=field,
        )
    return value


def _parse_catalog(doc: Any, path: str) -> dict[str, ModelInfo]:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("models"), list):
        raise InputError(
            'expected a JSON object {"models": [{"name": ..., "context_window": ...}, ...]}',
            path=path,
        )
    entries: dict[str, ModelInfo] = {}
    for i, raw in enumerate(doc["models"]):
        where = f"models[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
            raise InputError("each model needs a non-empty string name", path=path, field=where)
        provider = raw.get("provider", "")
        if not isinstance(provider, str):
            raise InputError("provider must be a string", path=path, field=f"{where}.provider")
        window = _positive(raw.get("context_window"), path=path, field=f"{where}.context_window")
        assert window is not None
        info = ModelInfo(
            name=raw["name"],
            provider=provider,
            context_window=window,
            max_output=_positive(
                raw.get("max_output"), path=path, field=f"{where}.max_output", optional=True
            ),
            max_input=_positive(
                raw.get("max_input"), path=path, field=f"{where}.max_input", optional=True
            ),
        )
        aliases = raw.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InputError(
                "aliases must be a list of strings", path=path, field=f"{where}.aliases"
            )
        for key in (info.name, *aliases):
            entries[key.lower()] = info
    return entries


@functools.lru_cache(maxsize=1)
def _builtin() -> dict[str, ModelInfo]:
    text = resources.files(__package__).joinpath("models.json").read_text(encoding="utf-8")
    return _parse_catalog(json.loads(text), "comal/tokens/models.json")


@functools.lru_cache(maxsize=8)
def _user(path: str, mtime_ns: int, size: int) -> dict[str, ModelInfo]:
    # mtime and size are part of the cache key so an edited file is read again.
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
    except OSError as exc:
        raise InputError(f"cannot read the models file: {exc.strerror or exc}", path=path) from exc
    return _parse_catalog(doc, path)


def user_models_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The user catalog in effect: ``COMAL_MODELS_FILE`` (empty disables it), else the platform
    config folder's ``models.json``; ``None`` when there is none."""
    env = os.environ if env is None else env
    if MODELS_FILE_ENV in env:
        value = env[MODELS_FILE_ENV].strip()
        if not value:
            return None
        path = Path(value).expanduser()
        if not path.is_file():
            raise InputError(
                f"{MODELS_FILE_ENV} points at {path}, which is not a file; fix or unset it",
                field=MODELS_FILE_ENV,
            )
        return path
    default = Path(platformdirs.user_config_dir("comal")) / "models.json"
    return default if default.is_file() else None


def load_catalog(env: Mapping[str, str] | None = None) -> dict[str, tuple[ModelInfo, str]]:
    """Every known model name (lower case, aliases included) -> (info, origin) where origin is
    ``catalog`` or ``user-catalog``; user entries win."""
    return dict(_catalog(env))


def _catalog(env: Mapping[str, str] | None) -> Mapping[str, tuple[ModelInfo, str]]:
    path = user_models_file(env)
    if path is None:
        return _merged(None, 0, 0)
    stat = path.stat()
    return _merged(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _merged(path: str | None, mtime_ns: int, size: int) -> Mapping[str, tuple[ModelInfo, str]]:
    # Made once per user file version: every request a proxy serves resolves its model's window.
    catalog = {key: (info, "catalog") for key, info in _builtin().items()}
    if path is not None:
        for key, info in _user(path, mtime_ns, size).items():
            catalog[key] = (info, "user-catalog")
    return MappingProxyType(catalog)


# Suffixes that name a snapshot of a catalogued model: dates (-20250929, -2024-08-06, @20250929,
# -09-2025), version counters (-001, Bedrock -v1:0) and channels (-latest, -preview, -exp).
_SNAPSHOT = re.compile(
    r"(?:-\d{8}|-\d{4}-\d{2}-\d{2}|@\d{8}|-\d{2}-\d{4}|-\d{3}|-v\d+(?::\d+)?|-latest|-preview|-exp)$"
)
# Bedrock prefixes an inference region and the vendor: "us.anthropic.claude-...".
_VENDOR = re.compile(r"^(?:[a-z]{2,6}\.)?(?:anthropic|openai|google)\.")
_PROVIDER = re.compile(r"^[a-z][a-z0-9_-]*$")


def _candidates(model: str) -> list[str]:
    full = model.strip().lower()
    name = full
    head, sep, tail = name.partition(":")
    if sep and tail and _PROVIDER.match(head):
        name = tail  # "provider:model"; names are unique across providers
    name = name.rsplit("/", 1)[-1]  # "openai/gpt-5", "models/gemini-2.5-pro"
    name = _VENDOR.sub("", name)
    # The name as given comes first: a user entry may itself contain ":" (Ollama "qwen3:32b").
    out = [full, name]
    while (stripped := _SNAPSHOT.sub("", out[-1])) != out[-1]:
        out.append(stripped)
    # OpenRouter and others write Claude versions with dots: claude-sonnet-4.5.
    out += [c.replace(".", "-") for c in out if "." in c and c.startswith("claude")]
    return out


def lookup_model(model: str, *, env: Mapping[str, str] | None = None) -> ModelInfo | None:
    """Find ``model`` by exact name, ``provider:name``, or a dated/snapshot spelling of a
    catalogued name (``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``)."""
    found = _lookup(model, _catalog(env))
    return None if found is None else found[0]


def _lookup(
    model: str, catalog: Mapping[str, tuple[ModelInfo, str]]
) -> tuple[ModelInfo, str] | None:
    for candidate in _candidates(model):
        if candidate in catalog:
            return catalog[candidate]
    return None


_TOKENS = re.compile(r"^(\d[\d_,]*)([km]?)$")


# No model has a window near this; a larger value is a typo (and would overflow the
# ledger's 64-bit integers downstream).
MAX_WINDOW = 100_000_000


def _parse_window(value: str, variable: str) -> int:
    match = _TOKENS.match(value.strip().lower())
    if match is not None:
        number = int(match.group(1).replace("_", "").replace(",", ""))
        number *= {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2)]
        if 0 < number <= MAX_WINDOW:
            return number
    raise InputError(
        f"{variable}={value!r} is not a number of tokens in 1..{MAX_WINDOW:,}; "
        f"set e.g. {variable}=100000 (or 100k) or unset it",
        field=variable,
    )


def resolve_window(
    model: str | None,
    *,
    override: int | None = None,
    env: Mapping[str, str] | None = None,
) -> WindowResolution:
    """The effective window for ``model``: the minimum of the model's advertised window, an
    explicit ``override`` and ``COMAL_CONTEXT_WINDOW``; :data:`FALLBACK_WINDOW` when none is
    known. Raises :class:`~comal.errors.InputError` for a bad override, variable or user file."""
    env = os.environ if env is None else env
    candidates: list[tuple[int, str]] = []
    info: ModelInfo | None = None
    if model:
        found = _lookup(model, _catalog(env))
        if found is not None:
            info, origin = found
            candidates.append((info.context_window, f"{origin}:{info.name}"))
    if override is not None:
        if (
            isinstance(override, bool)
            or not isinstance(override, int)
            or not 0 < override <= MAX_WINDOW
        ):
            raise InputError(
                f"--context-window must be a number of tokens in 1..{MAX_WINDOW:,}, not "
                f"{override!r}",
                field="--context-window",
            )
        candidates.append((override, "override"))
    raw = env.get(CONTEXT_WINDOW_ENV, "")
    if raw.strip():
        candidates.append((_parse_window(raw, CONTEXT_WINDOW_ENV), f"env:{CONTEXT_WINDOW_ENV}"))
    # min() keeps the first of equal windows, so a tie is credited to the model.
    window, source = (
        min(candidates, key=lambda c: c[0]) if candidates else (FALLBACK_WINDOW, "fallback")
    )
    return WindowResolution(
        window=window,
        max_output=None if info is None else info.max_output,
        source=source,
        max_input=None if info is None else info.max_input,
        model=info,
    )
