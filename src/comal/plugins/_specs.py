"""The hooks a comal plugin may implement (pluggy hook specifications, project ``comal``).

A plugin is a module (or any object) whose functions carry :data:`hookimpl`::

    from comal.plugins import hookimpl

    @hookimpl
    def comal_engines():
        return [MyEngine()]

Every hook takes no argument and returns an iterable of what it registers; each is called
once, when the plugin is enabled, and what it returned is kept for the life of the process.
A plugin implements only the hooks it needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import pluggy

if TYPE_CHECKING:
    from ..context import Engine
    from ..messages.wire import WireProtocol
    from ..ops import Operation
    from ..providers import ProviderScheme

__all__ = [
    "HOOKS",
    "PROJECT",
    "comal_engines",
    "comal_job_handlers",
    "comal_operations",
    "comal_providers",
    "comal_settings",
    "comal_wire_protocols",
    "hookimpl",
    "hookspec",
]

PROJECT: Final = "comal"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def comal_operations() -> Iterable[Operation]:
    """Operations (:class:`comal.ops.Operation`) for the one registry every surface builds.

    They are judged by the house, receipted and counted in the model's catalog exactly like
    the native ones; a name another operation has is refused."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


@hookspec
def comal_providers() -> Iterable[ProviderScheme]:
    """Model schemes (:class:`comal.providers.ProviderScheme`): the part of ``--model`` before
    ``:`` and how to check and build a provider for it; a scheme registered twice is refused."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


@hookspec
def comal_engines() -> Iterable[Engine]:
    """Context engines (:class:`comal.context.Engine`), by their ``name``; an engine name
    registered twice is refused, so no plugin can take the place of another's engine."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


@hookspec
def comal_job_handlers() -> Iterable[Any]:
    """Handlers of the maintenance jobs an engine plans, for :mod:`comal.compaction`."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


@hookspec
def comal_settings() -> Iterable[Any]:
    """Settings sections (:class:`comal.plugins.PluginSettings`): the part of the configuration's
    ``plugin_settings`` the plugin reads, checked with its model when the configuration is
    loaded; a section another plugin reads is refused."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


@hookspec
def comal_wire_protocols() -> Iterable[WireProtocol]:
    """Wire protocols (:class:`comal.messages.wire.WireProtocol`): a provider API the proxy
    serves on its routes and FakeServer answers; a name or route registered twice is refused."""
    return ()  # the spec itself contributes nothing: pluggy calls the plugins\' hooks


HOOKS: Final = (
    "comal_operations",
    "comal_providers",
    "comal_engines",
    "comal_job_handlers",
    "comal_settings",
    "comal_wire_protocols",
)
