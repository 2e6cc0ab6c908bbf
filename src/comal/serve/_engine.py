"""The proxy's engine: the turn service (:mod:`comal.turns`) of each session it routes to.

:class:`EngineAdapter` names the engine and holds its validated configuration and the engine
cache, built once (the proxy assembles on every request, across sessions); :meth:`session`
gives the :class:`~comal.turns.ContextSession` of one session with them, through which the
proxy budgets, reads the view, assembles, stores what the assembly proposes and maintains,
exactly as the agent does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..context import EngineCache, get_engine
from ..ledger import LedgerBackend, Scope
from ..tokens import TokenCounter
from ..turns import ContextSession, configure

__all__ = ["EngineAdapter"]


class EngineAdapter:
    """The engine ``name`` with its configuration (``settings`` validated with the engine's
    ranges; the counter is the ledger's)."""

    def __init__(
        self,
        name: str,
        counter: TokenCounter,
        settings: Mapping[str, Any] | BaseModel | None = None,
    ) -> None:
        self.engine = get_engine(name)
        self.name = name
        self.config = configure(self.engine, settings, counter, where="engine_settings")
        # Facts of stored entries, keyed by entry id and digest: safe to share across sessions.
        self.cache = EngineCache()

    def session(self, ledger: LedgerBackend, scope: Scope) -> ContextSession:
        return ContextSession(ledger, scope, self.engine, self.config, cache=self.cache)
