"""The built-in job handlers plugin: how the limit, dag and pipeline engines' jobs run,
registered through the seam exactly as a plugin's engine registers its own."""

from __future__ import annotations

from ..plugins import hookimpl
from ._handlers import builtin_handlers
from ._table import JobHandler

__all__ = ["comal_job_handlers"]


@hookimpl
def comal_job_handlers() -> tuple[JobHandler, ...]:
    return builtin_handlers()
