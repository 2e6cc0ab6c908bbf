"""The one registry of engines: a read-only mapping from name to engine, built here from the
engines this package ships (no registration at run time, so nothing can swap one in)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ._engine import Engine, UnknownEngine
from .dag import DagEngine
from .limit import LimitEngine
from .pipeline import PipelineEngine

__all__ = ["ENGINES", "engine_names", "get_engine"]

ENGINES: Mapping[str, Engine] = MappingProxyType(
    {e.name: e for e in (LimitEngine(), DagEngine(), PipelineEngine())}
)


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINES)


def get_engine(name: str) -> Engine:
    """The engine called ``name``, or :class:`UnknownEngine` naming the ones there are."""
    found = ENGINES.get(name)
    if found is None:
        raise UnknownEngine(
            f"unknown context engine {name!r}; this comal has: {', '.join(ENGINES)}. "
            "Set `engine` in the configuration or pass --engine with one of them."
        )
    return found
