"""The process's plugins: one pluggy manager, loaded on first use, enabled only by the operator.

Loading happens in one order, the first time a registry is needed (never at import, so
``comal --help`` pays nothing for it):

1. the built-in plugins (:data:`BUILTINS`), imported by module name so this package imports
   nothing above it: the SDK providers, the ``script:`` model, the three context engines and
   their job handlers, and ``WebFetch`` with its settings section;
2. installed entry points of the group :data:`ENTRY_POINT_GROUP`, sorted by name;
3. later, the modules a loaded configuration names under ``plugins:`` (:func:`enable_plugins`).

Each plugin's hooks are called once, when it is registered, and what they return is checked
there and then: a plugin that does not import, a hook that raises or returns something the seam
refuses, and a name two plugins register are coded errors naming the plugin, before anything
runs. Nothing is ever replaced: enabling a plugin can only add names.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

import pluggy

from ..errors import ComalError
from . import _lifecycle, _specs
from ._errors import PluginConflict, PluginHookError, PluginLoadError

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "Plugins",
    "current",
    "enable_plugins",
    "engines",
    "job_handlers",
    "lifecycle",
    "operations",
    "plugin_infos",
    "provider_schemes",
    "reset_plugins",
    "settings_sections",
]

Source = Literal["builtin", "entry point", "config"]

ENTRY_POINT_GROUP: Final = "comal.plugins"
# name -> module; registered by name so that this low layer has no import of the ones above.
# The names cannot be a module's, so a module named under plugins: never collides with them.
BUILTINS: Final = (
    ("comal-providers", "comal.providers._plugin"),
    ("comal-script", "comal.providers.script._plugin"),
    ("comal-engines", "comal.context._plugin"),
    ("comal-jobs", "comal.compaction._plugin"),
    ("comal-web", "comal.ops._web_plugin"),
)


@dataclass(frozen=True, slots=True)
class _Kind:
    """One hook's contract: where its results go, what names them, what type they must be."""

    hook: str
    attr: str
    noun: str
    key: str | None = None
    type_path: tuple[str, str] | None = None


_KINDS: Final = (
    _Kind("comal_operations", "operations", "operation", "name", ("comal.ops", "Operation")),
    _Kind(
        "comal_providers", "providers", "provider scheme", "scheme",
        ("comal.providers", "ProviderScheme"),
    ),
    _Kind("comal_engines", "engines", "engine", "name", ("comal.context", "Engine")),
    _Kind(
        "comal_job_handlers", "job_handlers", "job handler", None,
        ("comal.compaction", "JobHandler"),
    ),
    _Kind(
        "comal_settings", "settings", "settings section", "section",
        ("comal.plugins", "PluginSettings"),
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One enabled plugin and what its hooks returned."""

    name: str
    source: Source
    module: str
    version: str | None = None
    operations: tuple[Any, ...] = ()
    providers: tuple[Any, ...] = ()
    engines: tuple[Any, ...] = ()
    job_handlers: tuple[Any, ...] = ()
    settings: tuple[Any, ...] = ()

    def registers(self) -> dict[str, list[str]]:
        """What it registers, by kind, as names (a job handler by its ``kind`` or type)."""
        out: dict[str, list[str]] = {}
        for kind in _KINDS:
            items: tuple[Any, ...] = getattr(self, kind.attr)
            out[kind.attr] = [_label(item, kind) for item in items]
        return out

    def as_dict(self) -> dict[str, Any]:
        head = {"name": self.name, "source": self.source, "module": self.module}
        return head | {"version": self.version} | self.registers()


def _label(item: Any, kind: _Kind) -> str:
    for attr in (kind.key, "kind", "name"):
        value = getattr(item, attr, None) if attr else None
        if isinstance(value, str) and value:
            return value
    return type(item).__name__


@dataclass
class Plugins:
    """A pluggy manager and the plugins registered in it, in the order they were."""

    pm: pluggy.PluginManager = field(default_factory=lambda: pluggy.PluginManager(_specs.PROJECT))
    infos: list[PluginInfo] = field(default_factory=list)
    _views: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.pm.add_hookspecs(_specs)
        self.pm.add_hookspecs(_lifecycle)

    def add(
        self, plugin: object, *, name: str, source: Source, module: str, version: str | None
    ) -> PluginInfo | None:
        """Register ``plugin``, call its hooks and keep what they return; ``None`` when the
        same object is already registered (a module named twice is enabled once)."""
        if self.pm.is_registered(plugin):
            return None
        if self.pm.has_plugin(name):
            raise PluginConflict(
                f"two plugins are called {name!r} ({module} and an earlier one); rename one "
                "entry point or remove one from plugins:",
                plugin=name,
            )
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            _require_markers(self.pm, plugin, name)
            info = PluginInfo(name, source, module, version, **self._collect(plugin, name))
            self._check_names(info)
        except (ComalError, pluggy.PluginValidationError, ValueError) as exc:
            if self.pm.is_registered(plugin):
                self.pm.unregister(plugin)
            if isinstance(exc, ComalError):
                raise
            raise PluginLoadError(
                f"plugin {name!r} ({module}) does not fit the seam: {exc}; see docs/plugins.md "
                "for the hooks and their signatures",
                plugin=name,
            ) from exc
        self.infos.append(info)
        self._views.clear()
        return info

    def _collect(self, plugin: object, name: str) -> dict[str, tuple[Any, ...]]:
        found: dict[str, tuple[Any, ...]] = {}
        for kind in _KINDS:
            caller = getattr(self.pm.hook, kind.hook)
            items: list[Any] = []
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    items += _call(impl.function, name, kind)
            found[kind.attr] = tuple(items)
        return found

    def _check_names(self, info: PluginInfo) -> None:
        for kind in _KINDS:
            if kind.key is None:
                continue
            owners = {
                _label(item, kind): other.name
                for other in self.infos
                for item in getattr(other, kind.attr)
            }
            for item in getattr(info, kind.attr):
                key = getattr(item, kind.key, None)
                if not isinstance(key, str) or not key:
                    raise PluginHookError(
                        f"plugin {info.name!r}: {kind.hook}() gave a {kind.noun} without a "
                        f"{kind.key}; give each one a non-empty string {kind.key}",
                        plugin=info.name,
                    )
                if key in owners:
                    raise PluginConflict(
                        f"plugin {info.name!r} registers the {kind.noun} {key!r}, which "
                        f"{_whose(owners[key], info.name)} already registers; names are unique, "
                        "nothing is replaced: disable one of them or rename the "
                        f"{kind.noun}",
                        plugin=info.name,
                    )
                owners[key] = info.name

    def flat(self, field_name: str) -> tuple[Any, ...]:
        return tuple(item for info in self.infos for item in getattr(info, field_name))

    def keyed(self, field_name: str, key: str) -> Mapping[str, Any]:
        """``field_name``'s items by ``key``, read-only, cached until the next plugin."""
        view = self._views.get(field_name)
        if view is None:
            view = MappingProxyType({getattr(i, key): i for i in self.flat(field_name)})
            self._views[field_name] = view
        return view


def _whose(owner: str, name: str) -> str:
    return "it" if owner == name else f"plugin {owner!r}"


def _call(function: Any, name: str, kind: _Kind) -> list[Any]:
    """Call one hook implementation: its results as a list, or a coded error naming the
    plugin (a plugin's exception never reaches a user as a traceback)."""
    try:
        result = function()
        if result is None:
            return []
        if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
            raise TypeError(f"it returned {type(result).__name__}; return a list of values")
        items = list(result)
    except ComalError as exc:
        raise PluginHookError(
            f"plugin {name!r}: {kind.hook}() failed: [{exc.code}] {exc}", plugin=name
        ) from exc
    except Exception as exc:  # a plugin's own code: any exception is its fault, not ours
        raise PluginHookError(
            f"plugin {name!r}: {kind.hook}() failed: {type(exc).__name__}: {exc}; fix the "
            "plugin, or disable it",
            plugin=name,
        ) from exc
    if kind.type_path is not None:
        module, attr = kind.type_path
        expected = getattr(importlib.import_module(module), attr)
        for item in items:
            if not isinstance(item, expected):
                raise PluginHookError(
                    f"plugin {name!r}: {kind.hook}() gave {type(item).__name__}, not a "
                    f"{module}.{attr}; return {attr} values",
                    plugin=name,
                )
    return items


def _require_markers(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    """A function named like a hook but not marked would be ignored in silence; say so."""
    marked = {caller.name for caller in pm.get_hookcallers(plugin) or ()}
    for hook in (*_specs.HOOKS, *_lifecycle.EVENTS.values()):
        if callable(getattr(plugin, hook, None)) and hook not in marked:
            raise PluginLoadError(
                f"plugin {name!r} defines {hook}() without @comal.plugins.hookimpl, so it "
                "would never be called; decorate it",
                plugin=name,
            )


def _import(module: str, name: str, where: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or whatever the plugin's own import raised
        raise PluginLoadError(
            f"plugin {name!r} ({where}) failed to import: {type(exc).__name__}: {exc}; "
            "install it where this Python finds it, or remove it",
            plugin=name,
        ) from exc


def _version(module: Any) -> str | None:
    value = getattr(module, "__version__", None)
    return value if isinstance(value, str) else None


def _entry_points(plugins: Plugins) -> None:
    # Reading every installed package's metadata: done once, when a registry is first needed.
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"entry point {ep.value}"
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginLoadError(
                f"plugin {ep.name!r} ({where}) failed to load: {type(exc).__name__}: {exc}; "
                "fix or uninstall the package that declares it",
                plugin=ep.name,
            ) from exc
        version = ep.dist.version if ep.dist is not None else None
        plugins.add(plugin, name=ep.name, source="entry point", module=ep.value, version=version)


_lock = threading.RLock()
_current: Plugins | None = None


def current() -> Plugins:
    """The process's plugins, loaded on first use (built-ins, then entry points). A load
    that fails leaves nothing half-done: the next use tries again from the start."""
    global _current
    with _lock:
        if _current is None:
            fresh = Plugins()
            for name, module in BUILTINS:
                plugin = _import(module, name, "built in")
                fresh.add(plugin, name=name, source="builtin", module=module, version=None)
            _entry_points(fresh)
            _current = fresh
        return _current


def enable_plugins(modules: Iterable[str], *, where: str = "the configuration") -> None:
    """Import and register ``modules`` (the ``plugins:`` of a configuration) after the
    built-ins and entry points; one already enabled is skipped. Only the operator's
    configuration calls this: the model has no operation that reaches it."""
    with _lock:
        plugins = current()
        for module in modules:
            plugin = _import(module, module, f"named under plugins: in {where}")
            version = _version(plugin)
            plugins.add(plugin, name=module, source="config", module=module, version=version)


def reset_plugins() -> None:
    """Forget every plugin; the next use loads the built-ins and entry points again. For
    tests that enable a plugin in process."""
    global _current
    with _lock:
        _current = None


def plugin_infos() -> tuple[PluginInfo, ...]:
    return tuple(current().infos)


def operations() -> tuple[Any, ...]:
    """Every plugin's operations, in plugin order."""
    return current().flat("operations")


def provider_schemes() -> Mapping[str, Any]:
    """Model schemes by name (``anthropic``, ``script``, ...), read-only."""
    return current().keyed("providers", "scheme")


def engines() -> Mapping[str, Any]:
    """Context engines by name, read-only; the built-in ones first."""
    return current().keyed("engines", "name")


def job_handlers() -> tuple[Any, ...]:
    """Every plugin's maintenance job handlers, flattened in plugin order."""
    return current().flat("job_handlers")


def lifecycle(event: _lifecycle.HookEvent) -> _lifecycle.HookOutcome:
    """Every enabled plugin's hook for ``event``, merged (:mod:`._lifecycle`)."""
    return _lifecycle.dispatch(current().pm, event)


def settings_sections() -> Mapping[str, Any]:
    """The configuration sections plugins read (``plugin_settings.<section>``), by section."""
    return current().keyed("settings", "section")
