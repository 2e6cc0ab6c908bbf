"""The one place the proxy calls a context engine: through the registry (:mod:`comal.context`).

Everything else in :mod:`comal.serve` goes through :class:`EngineAdapter`: it names the
engine, holds its validated configuration and the engine cache (both built once: the proxy
assembles on every request), reads the view with the stand-ins the engine names, and runs the
maintenance it plans after a turn (:mod:`comal.compaction`).
"""

from __future__ import annotations

from pydantic import BaseModel

from ..compaction import execute
from ..context import Assembly, EngineCache, View, engine_config, engine_names, get_engine
from ..ledger import LedgerBackend, Scope
from ..tokens import Budget, TokenCounter

__all__ = ["ENGINES", "EngineAdapter"]

ENGINES = engine_names()


class EngineAdapter:
    """The engine ``name`` with its configuration (``settings`` validated with the engine's
    ranges; the counter is the ledger's)."""

    def __init__(
        self, name: str, counter: TokenCounter, settings: dict[str, object] | None = None
    ) -> None:
        self.engine = get_engine(name)
        self.name = name
        given = dict(settings or {})
        if "counter" in self.engine.config_type.model_fields:
            given["counter"] = counter
        self.config: BaseModel = engine_config(self.engine, given)
        # Facts of stored entries, keyed by entry id and digest: safe to share across sessions.
        self.cache = EngineCache()

    def view(self, ledger: LedgerBackend, scope: Scope) -> View:
        return View.from_ledger(ledger, scope, bases=self.engine.bases)

    def assemble(self, view: View, budget: Budget) -> Assembly:
        return self.engine.assemble(view, budget, self.config, cache=self.cache)

    def maintain(self, ledger: LedgerBackend, scope: Scope, budget: Budget) -> tuple[object, ...]:
        """After a turn: the maintenance the engine plans now, executed against the ledger."""
        jobs = self.engine.plan(self.view(ledger, scope), budget, self.config, cache=self.cache)
        return execute(ledger, scope, jobs) if jobs else ()
