"""The built-in engine plugin: ``limit`` (the default), ``dag`` and ``pipeline``, in that order
(the order ``comal doctor`` and the configuration reference list them)."""

from __future__ import annotations

from ..plugins import hookimpl
from ._engine import Engine
from .dag import DagEngine
from .limit import LimitEngine
from .pipeline import PipelineEngine

__all__ = ["comal_engines"]


@hookimpl
def comal_engines() -> tuple[Engine, ...]:
    return (LimitEngine(), DagEngine(), PipelineEngine())
