"""The one place the proxy calls a context engine.

Everything else in :mod:`comal.serve` goes through :func:`assemble_view`, so when engines move
behind a registry (``comal.context.engines.get(name).assemble(view, budget, config)``) only
this function changes.
"""

from __future__ import annotations

from ..context import Assembly, EngineConfig, View, assemble
from ..errors import UserError
from ..tokens import Budget, TokenCounter

__all__ = ["ENGINES", "assemble_view"]

ENGINES = ("limit",)


def assemble_view(view: View, budget: Budget, engine: str, counter: TokenCounter) -> Assembly:
    """The engine ``engine``'s assembly of ``view`` under ``budget``."""
    if engine not in ENGINES:
        raise UserError(f"unknown engine {engine!r}; comal serve offers {', '.join(ENGINES)}")
    return assemble(view, budget, EngineConfig(counter=counter))
