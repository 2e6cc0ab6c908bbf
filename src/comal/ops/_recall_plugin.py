"""The dag engine's built-in plugin of recall operations (``ctx_search``, ``ctx_inspect``,
``ctx_expand``, :mod:`._recall`): registered through the plugin seam like any engine's tools,
so the native registry names no engine's operations. They are offered to the model only where
the session's engine is ``dag`` (:func:`comal.agent.agent_catalog`, the proxy's upstream tools)
and judged by the house like every operation."""

from __future__ import annotations

from ..plugins import hookimpl
from ._operation import Operation
from ._recall import recall_operations

__all__ = ["comal_operations"]


@hookimpl
def comal_operations() -> list[Operation]:
    return recall_operations()
