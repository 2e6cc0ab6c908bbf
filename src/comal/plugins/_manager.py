"""The process's plugins: one pluggy manager, loaded on first use, enabled only by the operator.

Loading happens in one order, the first time a registry is needed (never at import, so
``comal --help`` pays nothing for it):

1. the built-in plugins (:data:`BUILTINS`), imported by module name so this package imports
   nothing above it: the SDK providers, the ``script:`` model, the three context engines and
   their job handlers, the wire protocols, the operator's hooks, and ``WebFetch`` with its
   settings section;
2. installed entry points of the group :data:`ENTRY_POINT_GROUP`, sorted by name — read from
   the interpreter's package directories only, never the current folder (:mod:`._discovery`);
   all of them, or only those the configuration names when ``installed_plugins: listed`` or
   :data:`INSTALLED_ENV` says so (the stricter of the two wins);
3. later, the modules a loaded configuration names under ``plugins:`` (:func:`enable_plugins`).

Entry points are loaded when the configuration is (:func:`enable_plugins`), or at the first
registry read before it. An installed plugin left out is listed as not enabled
(``plugin_infos(include_disabled=True)``), its module never imported.

Each plugin's hooks are called once, when it is registered, and what they return is checked
there and then: a plugin that does not import, a hook that raises or returns something the seam
refuses, and a name two plugins register are coded errors naming the plugin, before anything
runs. Nothing is ever replaced: enabling a plugin can only add names.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

import pluggy

from ..errors import ComalError, InputError
from . import _lifecycle, _specs
from ._discovery import import_plugin, installed_entry_points, load_entry_point
from ._errors import PluginConflict, PluginHookError, PluginLoadError

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "INSTALLED_ENV",
    "InstalledPlugins",
    "PluginInfo",
    "Plugins",
    "current",
    "enable_plugins",
    "engines",
    "job_handlers",
    "lifecycle",
    "memo",
    "operations",
    "plugin_infos",
    "provider_schemes",
    "reset_plugins",
    "settings_sections",
    "wire_protocols",
]

Source = Literal["builtin", "entry point", "config"]
# all: every installed entry point is enabled; listed: only those the configuration names.
InstalledPlugins = Literal["all", "listed"]

ENTRY_POINT_GROUP: Final = "comal.plugins"
INSTALLED_ENV: Final = "COMAL_INSTALLED_PLUGINS"
# name -> module; registered by name so that this low layer has no import of the ones above.
# The names cannot be a module's, so a module named under plugins: never collides with them.
BUILTINS: Final = (
    ("comal-providers", "comal.providers._plugin"),
    ("comal-script", "comal.providers.script._plugin"),
    ("comal-engines", "comal.context._plugin"),
    ("comal-dag-recall", "comal.ops._recall_plugin"),
    ("comal-jobs", "comal.compaction._plugin"),
    ("comal-wire", "comal.messages.wire._plugin"),
    ("comal-hooks", "comal.hooks._plugin"),
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
    also: str | None = None  # an attribute holding more names, each unique too (routes)


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
    _Kind(
        "comal_wire_protocols", "wire_protocols", "wire protocol", "name",
        ("comal.messages.wire", "WireProtocol"), also="routes",
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
    wire_protocols: tuple[Any, ...] = ()
    # False for an installed entry point the operator left out: listed, never imported.
    enabled: bool = True

    def registers(self) -> dict[str, list[str]]:
        """What it registers, by kind, as names (a job handler by its ``kind`` or type)."""
        out: dict[str, list[str]] = {}
        for kind in _KINDS:
            items: tuple[Any, ...] = getattr(self, kind.attr)
            out[kind.attr] = [_label(item, kind) for item in items]
        return out

    def as_dict(self) -> dict[str, Any]:
        head = {"name": self.name, "source": self.source, "module": self.module}
        return head | {"version": self.version, "enabled": self.enabled} | self.registers()


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
    # Installed entry points found and not (yet) loaded; ``installed`` is the mode they were
    # settled in, ``None`` until then.
    waiting: list[EntryPoint] = field(default_factory=list)
    installed: InstalledPlugins | None = None
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

    def _collect(self, plugin: object, name: str) -> dict[str, Any]:
        found: dict[str, Any] = {}  # PluginInfo's fields, each a tuple of what a hook gave
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
                _claim(owners, key, kind.noun, info.name)
            if kind.also is not None:
                taken = {
                    name: other.name
                    for other in self.infos
                    for item in getattr(other, kind.attr)
                    for name in getattr(item, kind.also)
                }
                for item in getattr(info, kind.attr):
                    for name in getattr(item, kind.also):
                        _claim(taken, name, f"{kind.noun}'s {kind.also[:-1]}", info.name)

    def memo(self, name: str, build: Callable[[], Any]) -> Any:
        """``build()``, made once per plugin set: what a registry derives from the plugins
        (the executor table) is made again only when a plugin is added."""
        key = f"memo:{name}"
        if key not in self._views:
            self._views[key] = build()
        return self._views[key]

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


def _claim(owners: dict[str, str], key: str, noun: str, plugin: str) -> None:
    """Note that ``plugin`` registers ``key``; a key already registered is a conflict."""
    if key in owners:
        raise PluginConflict(
            f"plugin {plugin!r} registers the {noun} {key!r}, which "
            f"{_whose(owners[key], plugin)} already registers; names are unique, nothing is "
            f"replaced: disable one of them or rename the {noun}",
            plugin=plugin,
        )
    owners[key] = plugin


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


def _version(module: Any) -> str | None:
    value = getattr(module, "__version__", None)
    return value if isinstance(value, str) else None


def _mode(configured: InstalledPlugins) -> InstalledPlugins:
    """The configuration's ``installed_plugins`` or :data:`INSTALLED_ENV`, whichever is
    stricter: either can lock a deployment down to the plugins it lists."""
    raw = os.environ.get(INSTALLED_ENV, "").strip().lower()
    if raw and raw not in get_args(InstalledPlugins):
        raise InputError(
            f"{INSTALLED_ENV}={raw!r} is not one of all, listed; set it to listed (only the "
            "installed plugins the configuration names) or all, or unset it",
            field=INSTALLED_ENV,
        )
    return "listed" if "listed" in (raw, configured) else "all"


def _named(ep: EntryPoint, names: set[str]) -> bool:
    return bool({ep.name, ep.module, ep.value} & names)


def _settle(plugins: Plugins, configured: InstalledPlugins, names: Iterable[str]) -> None:
    """Load the installed entry points the mode enables (sorted by name); the rest wait,
    listed as not enabled, until a configuration names them."""
    mode = _mode(configured)
    wanted = set(names)
    if mode == "listed" and plugins.installed == "all":
        loose = [
            i.name for i in plugins.infos if i.source == "entry point" and i.name not in wanted
        ]
        if loose:
            raise PluginLoadError(
                f"installed plugin(s) {', '.join(loose)} were loaded before the configuration "
                "said installed_plugins: listed, and a plugin cannot be unloaded; set "
                f"{INSTALLED_ENV}=listed so none loads before the configuration is read",
                plugin=loose[0],
            )
    plugins.installed = "listed" if "listed" in (mode, plugins.installed) else "all"
    for ep in list(plugins.waiting):
        if plugins.installed == "all" or _named(ep, wanted):
            plugin = load_entry_point(ep)
            version = ep.dist.version if ep.dist is not None else None
            plugins.add(plugin, name=ep.name, source="entry point", module=ep.value,
                        version=version)  # fmt: skip
            plugins.waiting.remove(ep)


_lock = threading.RLock()
_current: Plugins | None = None


def _found() -> Plugins:
    """The built-ins registered and the installed entry points found (not loaded), made
    once: a load that fails leaves nothing half-done, the next use tries again."""
    global _current
    with _lock:
        if _current is None:
            fresh = Plugins()
            for name, module in BUILTINS:
                plugin = import_plugin(module, name, "built in")
                fresh.add(plugin, name=name, source="builtin", module=module, version=None)
            # Reading installed packages' metadata: once, when a registry is first needed.
            fresh.waiting = installed_entry_points(ENTRY_POINT_GROUP)
            _current = fresh
        return _current


def current() -> Plugins:
    """The process's plugins. Read before any configuration was loaded, the installed entry
    points are settled by :data:`INSTALLED_ENV` alone (all of them unless it says listed)."""
    with _lock:
        plugins = _found()
        if plugins.installed is None:
            _settle(plugins, "all", ())
        return plugins


def enable_plugins(
    modules: Iterable[str],
    *,
    where: str = "the configuration",
    installed: InstalledPlugins = "all",
) -> None:
    """Enable what a configuration says: the installed entry points its ``installed_plugins``
    mode lets in (with ``listed``, those ``modules`` names by entry point name or module),
    then ``modules`` that are not entry points, imported and registered after them; one
    already enabled is skipped. Only the operator's configuration calls this: the model has
    no operation that reaches it."""
    names = list(modules)
    with _lock:
        plugins = _found()
        _settle(plugins, installed, names)
        entry = {i.name for i in plugins.infos if i.source == "entry point"}
        entry |= {i.module for i in plugins.infos if i.source == "entry point"}
        for module in names:
            if module in entry:
                continue
            plugin = import_plugin(module, module, f"named under plugins: in {where}")
            version = _version(plugin)
            plugins.add(plugin, name=module, source="config", module=module, version=version)


def reset_plugins() -> None:
    """Forget every plugin; the next use loads the built-ins and entry points again. For
    tests that enable a plugin in process."""
    global _current
    with _lock:
        _current = None


def plugin_infos(*, include_disabled: bool = False) -> tuple[PluginInfo, ...]:
    """The enabled plugins in the order they were registered; with ``include_disabled``, then
    the installed entry points left out (``enabled=False``: nothing of them was imported)."""
    plugins = current()
    infos = tuple(plugins.infos)
    if not include_disabled:
        return infos
    left = tuple(
        PluginInfo(ep.name, "entry point", ep.value, ep.dist.version if ep.dist else None,
                   enabled=False)
        for ep in plugins.waiting
    )  # fmt: skip
    return infos + left


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


def memo(name: str, build: Callable[[], Any]) -> Any:
    """``build()`` made once per set of enabled plugins (see :meth:`Plugins.memo`)."""
    return current().memo(name, build)


def settings_sections() -> Mapping[str, Any]:
    """The configuration sections plugins read (``plugin_settings.<section>``), by section."""
    return current().keyed("settings", "section")


def wire_protocols() -> Mapping[str, Any]:
    """Wire protocols by name, read-only; the built-in ones first."""
    return current().keyed("wire_protocols", "name")
