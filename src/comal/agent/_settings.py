"""What one agent runs with: the model, its window, the engine, caps and checks.

:class:`AgentSettings` is frozen and built once, by the host, from operator sources only
(configuration file, environment, command-line flags; see :mod:`comal.agent._config`). Nothing
the model proposes reaches it: there is no operation that changes a window, a cap or the engine
(CFG-2), and the human controls (model, effort, mode) are human-audience operations the judge
refuses from the model (OPS-6).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import BaseModel

from ..context import EngineConfig, get_engine
from ..tokens import WindowResolution, resolve_window
from ._cache import CacheConfig
from ._spend import SpendCaps

__all__ = ["DEFAULT_SYSTEM", "AgentSettings", "TaskBudget", "WorkSettings"]

# Static on purpose (CCH-1): identity, instructions and rules only; anything that changes per
# turn (date, workspace) goes into the preamble of the user message, so the cached prefix holds.
DEFAULT_SYSTEM = (
    "You are comal, a careful software agent working in the user's workspace through tools.\n"
    "- Every tool call is judged by the house before it runs; a denied call says why and which "
    "rule decided. Do not retry a denied call unchanged: change the approach or ask the user.\n"
    "- Results may say `uncertain` after an interruption: the effects are unknown. Inspect "
    "(Read, Glob, Grep) before proposing the action again.\n"
    "- Old tool outputs may appear as exact references; read them with EvidenceRead when the "
    "details matter. A checkpoint message stands for earlier steps; the ledger keeps them all.\n"
    "- When the task is done, answer with a short summary and no tool calls."
)


@dataclass(frozen=True, slots=True)
class TaskBudget:
    """What the whole task may spend (WRK-5), counted over the session and its work steps:
    ``tokens`` (input, cache reads and writes, output) and ``turns`` (model requests); ``None``
    is no limit."""

    tokens: int | None = None
    turns: int | None = None

    @property
    def limited(self) -> bool:
        return self.tokens is not None or self.turns is not None


@dataclass(frozen=True, slots=True)
class WorkSettings:
    """Delegated work steps (WRK-1): ``parallel`` children may run at once; ``models`` are
    the model specs a step may name besides the parent's; ``max_turns`` is a step's default
    and ceiling."""

    parallel: int = 2
    models: tuple[str, ...] = ()
    max_turns: int = 20


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """``model`` is the name sent in each request; ``window`` the resolved effective window
    (TOK-3); ``output_reserve`` overrides the budget's default reserve and
    ``output_escalation`` is the most output the first request after a compaction may ask for
    (MEM-3; None: no escalation); ``checks`` are the
    commands :meth:`Agent.finish` runs before a session may be marked finished (RES-5);
    ``engine_name`` names the context engine in the registry and ``engine`` is its
    configuration (that engine's ``config_type``); ``cache`` the prompt-cache settings
    (retention, tool deferral, break detection: :class:`~comal.agent.CacheConfig`);
    ``budget`` the whole task's (:class:`TaskBudget`) and ``work`` its work steps'
    (:class:`WorkSettings`)."""

    model: str
    window: WindowResolution
    system: str = DEFAULT_SYSTEM
    effort: str | None = None
    max_turns: int = 50
    output_reserve: int | None = None
    output_escalation: int | None = 32_768
    engine: BaseModel = field(default_factory=EngineConfig)
    engine_name: str = "limit"
    spend: SpendCaps = field(default_factory=SpendCaps)
    checks: tuple[str, ...] = ()
    preamble: bool = True
    cache: CacheConfig = field(default_factory=CacheConfig)
    budget: TaskBudget = field(default_factory=TaskBudget)
    work: WorkSettings = field(default_factory=WorkSettings)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, not {self.max_turns}")
        engine = get_engine(self.engine_name)
        if not isinstance(self.engine, engine.config_type):
            raise ValueError(
                f"engine {self.engine_name!r} takes a {engine.config_type.__name__}, "
                f"not a {type(self.engine).__name__}"
            )

    @classmethod
    def for_model(cls, model: str, *, context_window: int | None = None, **kw: Any) -> Self:
        """Settings for ``model`` with its window resolved from the catalog, the override and
        ``COMAL_CONTEXT_WINDOW`` (TOK-3); ``kw`` are the other fields."""
        return cls(model, resolve_window(model, override=context_window), **kw)
