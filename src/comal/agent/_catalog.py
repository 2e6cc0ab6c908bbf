"""The model's catalog under an engine: recall tools only while their engine runs (DAG-7)."""

from __future__ import annotations

from ..context import ENGINES, Engine
from ..ops import Catalog

__all__ = ["model_catalog"]


def model_catalog(catalog: Catalog, engine: Engine) -> Catalog:
    """``catalog`` without the operations another engine offers and this one does not: the
    ``ctx_*`` recall tools exist only under ``dag``, ``session_search`` only under
    ``pipeline``. The house judges calls against this catalog, so a recall tool the model
    guesses while another engine runs is refused like any unoffered operation."""
    others = {name for e in ENGINES.values() for name in e.model_tools}
    hidden = others - set(engine.model_tools)
    kept = tuple(op for op in catalog.operations if op.name not in hidden)
    return Catalog(catalog.surface, kept)
