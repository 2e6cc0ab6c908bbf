"""The one place the proxy calls a context engine.

Everything else in :mod:`comal.serve` goes through :class:`EngineAdapter`, so when engines move
behind a registry (``comal.context.engines.get(name).assemble(view, budget, config)``) only
this module changes.
"""

from __future__ import annotations

from ..context import Assembly, EngineConfig, View, assemble
from ..errors import UserError
from ..tokens import Budget, TokenCounter

__all__ = ["ENGINES", "EngineAdapter"]

ENGINES = ("limit",)


class EngineAdapter:
    """The engine ``name`` with its configuration, built once (validating a config is not free,
    and the proxy assembles on every request)."""

    def __init__(self, name: str, counter: TokenCounter) -> None:
        if name not in ENGINES:
            raise UserError(f"unknown engine {name!r}; comal serve offers {', '.join(ENGINES)}")
        self.name = name
        self.config = EngineConfig(counter=counter)

    def assemble(self, view: View, budget: Budget) -> Assembly:
        return assemble(view, budget, self.config)
