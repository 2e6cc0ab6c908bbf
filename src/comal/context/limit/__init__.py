"""The limit engine, "memory to the limit" (LIM-1..7): verbatim while it fits, then sticky exact
references to old large tool results, then a deterministic checkpoint. See :mod:`._assemble`.
"""

from __future__ import annotations

from pydantic import BaseModel

from ...tokens import Budget
from .._assembly import Assembly
from .._engine import Base, Job, StoreCheckpoint
from .._render import EngineCache
from .._view import View
from ._assemble import assemble
from ._compact import compact, render_state, step_groups, work_state
from ._config import EngineConfig, Limits
from ._state import ENGINE_NAME, ENGINE_VERSION, EngineState
from ._workstate import WorkState

__all__ = [
    "ENGINE_NAME",
    "ENGINE_VERSION",
    "EngineConfig",
    "EngineState",
    "LimitEngine",
    "Limits",
    "WorkState",
    "assemble",
    "compact",
    "render_state",
    "step_groups",
    "work_state",
]


def _config(config: BaseModel) -> EngineConfig:
    if not isinstance(config, EngineConfig):
        raise TypeError(f"the limit engine takes an EngineConfig, not {type(config).__name__}")
    return config


class LimitEngine:
    """The :class:`~comal.context.Engine` value of the limit engine."""

    name = "limit"
    description = "verbatim while it fits, then exact references, then a deterministic checkpoint"
    config_type: type[BaseModel] = EngineConfig
    bases: frozenset[Base] = frozenset({"checkpoint"})
    model_tools: tuple[str, ...] = ("EvidenceRead", "memory_search")
    system_clause = ""

    def threshold_ratio(self, config: BaseModel) -> float:
        return _config(config).threshold_ratio

    def assemble(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        state: object = None,
        cache: EngineCache | None = None,
    ) -> Assembly:
        return assemble(view, budget, _config(config), state=state, cache=cache)

    def plan(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        force: bool = False,
        cache: EngineCache | None = None,
    ) -> tuple[Job, ...]:
        # Checkpoints are derived inside assemble when the history crosses the threshold, so
        # the request that needs one already carries it; only /compact asks for one early.
        if not force:
            return ()
        proposal = compact(view, budget, _config(config))
        return () if proposal is None else (StoreCheckpoint(proposal),)
