"""The plugin seam (PLG-1): operations, model schemes, context engines and job handlers that
plugins add to the one registry of each, through pluggy hooks (project ``comal``).

::

    from comal.plugins import hookimpl

    @hookimpl
    def comal_operations():          # -> Iterable[comal.ops.Operation]
        return [word_count]

    @hookimpl
    def comal_providers():           # -> Iterable[comal.providers.ProviderScheme]
        return [EchoScheme()]

The hooks are :func:`~._specs.comal_operations`, :func:`~._specs.comal_providers`,
:func:`~._specs.comal_engines`, :func:`~._specs.comal_job_handlers` and
:func:`~._specs.comal_settings` (:mod:`._specs`).
The built-in providers, the ``script:`` model and the three engines are plugins of this seam
too. A plugin is enabled by the operator only — an installed entry point of the group
``comal.plugins`` (read from the interpreter's site-packages, never the current folder; with
``installed_plugins: listed`` or :data:`INSTALLED_ENV` only those the configuration names), or a
module named under ``plugins:`` in the configuration; the model has no operation that loads,
unloads or configures one. ``docs/plugins.md`` is the guide.

This package sits low (beside :mod:`comal.errors`): it imports no other layer, loads the
built-in plugins by module name, and imports pluggy only when a registry is first needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from ._errors import PluginConflict, PluginError, PluginHookError, PluginLoadError
from ._settings import PluginSettings

if TYPE_CHECKING:
    from ._lifecycle import EVENTS, HookEvent, HookOutcome, HookResult, LifecycleEvent
    from ._manager import (
        ENTRY_POINT_GROUP,
        INSTALLED_ENV,
        PluginInfo,
        enable_plugins,
        engines,
        job_handlers,
        lifecycle,
        memo,
        operations,
        plugin_infos,
        provider_schemes,
        reset_plugins,
        settings_sections,
        wire_protocols,
    )
    from ._specs import PROJECT, hookimpl, hookspec

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVENTS",
    "INSTALLED_ENV",
    "PROJECT",
    "HookEvent",
    "HookOutcome",
    "HookResult",
    "LifecycleEvent",
    "PluginConflict",
    "PluginError",
    "PluginHookError",
    "PluginInfo",
    "PluginLoadError",
    "PluginSettings",
    "enable_plugins",
    "engines",
    "hookimpl",
    "hookspec",
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

# Importing pluggy and reading entry points waits for the first registry that needs them.
_LAZY = {
    "ENTRY_POINT_GROUP": "._manager",
    "INSTALLED_ENV": "._manager",
    "PluginInfo": "._manager",
    "enable_plugins": "._manager",
    "engines": "._manager",
    "job_handlers": "._manager",
    "lifecycle": "._manager",
    "memo": "._manager",
    "EVENTS": "._lifecycle",
    "HookEvent": "._lifecycle",
    "HookOutcome": "._lifecycle",
    "HookResult": "._lifecycle",
    "LifecycleEvent": "._lifecycle",
    "operations": "._manager",
    "plugin_infos": "._manager",
    "provider_schemes": "._manager",
    "reset_plugins": "._manager",
    "settings_sections": "._manager",
    "wire_protocols": "._manager",
    "PROJECT": "._specs",
    "hookimpl": "._specs",
    "hookspec": "._specs",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
