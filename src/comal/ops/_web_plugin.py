"""The built-in plugin of ``WebFetch`` (:mod:`._web_fetch`): the operation, and its operator
settings section ``plugin_settings.web_fetch``, checked when the configuration is read."""

from __future__ import annotations

from ..plugins import PluginSettings, hookimpl
from ._operation import Operation
from ._web_fetch import SECTION, WebFetchSettings, web_fetch_operation

__all__ = ["comal_operations", "comal_settings"]


@hookimpl
def comal_operations() -> list[Operation]:
    return [web_fetch_operation()]


@hookimpl
def comal_settings() -> list[PluginSettings]:
    return [
        PluginSettings(
            SECTION,
            WebFetchSettings,
            "WebFetch: the hosts it may reach (allowed_hosts, private_hosts), max_bytes, "
            "timeout, max_redirects",
        )
    ]
