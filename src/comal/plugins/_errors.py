"""Errors of the plugin seam, each naming the plugin at fault and ending with what to do::

    PluginError (UserError)         root of this package's errors
    ├── PluginLoadError             a plugin could not be imported or registered
    ├── PluginHookError             a plugin's hook raised, or returned what the seam refuses
    └── PluginConflict              two plugins register one name (an engine, a scheme, ...)

All are found when the plugin is enabled, before anything runs.
"""

from __future__ import annotations

from ..errors import UserError

__all__ = ["PluginConflict", "PluginError", "PluginHookError", "PluginLoadError"]


class PluginError(UserError):
    """A plugin the operator enabled cannot be used; ``plugin`` is its name."""

    code = "PLUGIN_ERROR"

    def __init__(self, message: str, *, plugin: str) -> None:
        super().__init__(message)
        self.plugin = plugin


class PluginLoadError(PluginError):
    code = "PLUGIN_LOAD"


class PluginHookError(PluginError):
    code = "PLUGIN_HOOK"


class PluginConflict(PluginError):
    code = "PLUGIN_CONFLICT"
