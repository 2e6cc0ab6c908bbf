"""The browser plugin's hooks: enabled by the operator (``plugins: [comal.chrome]``)."""

from __future__ import annotations

from ..ops import Operation
from ..plugins import PluginSettings, hookimpl
from ._ops import chrome_operations
from ._settings import SECTION, ChromeSettings


@hookimpl
def comal_operations() -> list[Operation]:
    return chrome_operations()


@hookimpl
def comal_settings() -> list[PluginSettings]:
    return [
        PluginSettings(
            SECTION, ChromeSettings, "the browser's executable, origins, targets and tests"
        )
    ]
