"""A plugin's settings section: what it reads from the configuration's ``plugin_settings``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PluginSettings"]


@dataclass(frozen=True, slots=True)
class PluginSettings:
    """``plugin_settings.<section>`` belongs to this plugin and is checked with ``model`` (a
    pydantic model that forbids extra keys) when the configuration is loaded; the plugin's
    handlers read the checked mapping from the house that judges each call."""

    section: str
    model: Any
    description: str = ""
