"""The engine seam: one small protocol, one registry, and the maintenance jobs engines plan.

An engine is a value with two pure functions::

    assembly = engine.assemble(view, budget, config, state=..., cache=...)   # every turn
    jobs = engine.plan(view, budget, config)                                # after a turn

``assemble`` returns the active memory for the next request; ``plan`` says what maintenance is
due (a checkpoint to store, a chunk to summarize, summaries to condense) as :class:`Job`
values. Neither does I/O: the view was read before (:meth:`View.from_ledger`, reading the
stand-ins the engine names in ``bases``), and jobs are executed one layer up, beside the agent,
where summarizers and the ledger live (:mod:`comal.compaction`).

Surfaces never name an engine's functions: they look it up by name in the registry
(:mod:`._registry`: ``engine = "limit" | "dag" | "pipeline"`` in the configuration, ``--engine``
on the command line). The registry is a read-only mapping built by the plugin seam
(:mod:`comal.plugins`'s ``comal_engines`` hook) from the engines this package ships and those of
the plugins the operator enabled; the model has no operation that changes which engine runs, nor
one that enables a plugin (CFG-2, PLG-1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from ..errors import InputError, UserError
from ..tokens import Budget, TokenCounter, default_counter
from ._assembly import Assembly, CheckpointProposal
from ._render import EngineCache
from ._view import View

__all__ = [
    "Base",
    "Engine",
    "Job",
    "StoreCheckpoint",
    "UnknownEngine",
    "config_counter",
    "engine_config",
]

# The stand-ins a view may carry in front of its entries: the latest checkpoint (limit), the
# frontier of summaries covering the oldest history (dag).
Base = Literal["checkpoint", "summaries"]


class UnknownEngine(UserError):
    code = "UNKNOWN_ENGINE"


@dataclass(frozen=True, slots=True)
class Job:
    """Maintenance an engine asks for; executed (and persisted in one transaction) by the
    layer above. Subclasses are frozen dataclasses naming exactly what to do; one that only
    reports that nothing can be done (``actionable = False``) ends a sweep instead of counting
    as a pass."""

    actionable: ClassVar[bool] = True
    # What a sweep that met only jobs that are not actionable says it stopped at.
    stop_reason: ClassVar[str] = "blocked"

    @property
    def kind(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, slots=True)
class StoreCheckpoint(Job):
    """Persist a derived checkpoint (``/compact`` of the limit engine)."""

    proposal: CheckpointProposal


@runtime_checkable
class Engine(Protocol):
    """What every engine offers. ``config_type`` is its pydantic settings model (frozen,
    validated ranges); ``bases`` the stand-ins its view reads; ``model_tools`` the names of the
    registry operations offered to the model while it runs (recall tools);
    ``system_clause`` text appended to the system prompt while it runs ("" for none)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def config_type(self) -> type[BaseModel]: ...
    @property
    def bases(self) -> frozenset[Base]: ...
    @property
    def model_tools(self) -> tuple[str, ...]: ...
    @property
    def system_clause(self) -> str: ...

    def threshold_ratio(self, config: BaseModel) -> float:
        """The share of the input limit above which the budget reports pressure (TOK-4)."""
        ...

    def assemble(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        state: object = None,
        cache: EngineCache | None = None,
    ) -> Assembly: ...

    def plan(
        self,
        view: View,
        budget: Budget,
        config: BaseModel,
        *,
        force: bool = False,
        cache: EngineCache | None = None,
    ) -> tuple[Job, ...]:
        """Maintenance due now; ``force`` is ``/compact``: do what can be done even under
        the thresholds. ``cache`` is the caller's, as for ``assemble``. An engine with nothing
        to maintain returns ``()``."""
        ...


def engine_config(
    engine: Engine, settings: Mapping[str, Any] | BaseModel | None = None, *, where: str = ""
) -> BaseModel:
    """``settings`` validated as ``engine``'s configuration (its defaults when ``None``).

    A bad value is an :class:`~comal.errors.InputError` naming the key and the engine."""
    if isinstance(settings, BaseModel):
        if not isinstance(settings, engine.config_type):
            raise UserError(
                f"{type(settings).__name__} is not the configuration of engine {engine.name!r} "
                f"({engine.config_type.__name__})"
            )
        return settings
    try:
        return engine.config_type.model_validate(dict(settings or {}))
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or None
        raise InputError(
            f"invalid setting for engine {engine.name!r}: {first['msg']}; fix the value or "
            "remove the key to use the default",
            path=where or None,
            field=key,
        ) from exc


def config_counter(config: BaseModel) -> TokenCounter:
    """The token counter an engine configuration names (its ``token_counter``), else the
    default one."""
    counter: TokenCounter | None = getattr(config, "token_counter", None)
    return counter if counter is not None else default_counter()
