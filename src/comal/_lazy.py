"""Re-exports that load on first use (PEP 562), so importing a package costs what is used.

``comal``, ``comal.tokens`` and ``comal.providers`` name their exports in a table (name → the
submodule that defines it) and set ``__getattr__ = lazy_exports(__name__, TABLE, globals())``;
their ``TYPE_CHECKING`` imports keep the names visible to type checkers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` importing ``table[name]`` (relative to ``package``) on first use;
    the value is kept in ``namespace`` so the next access is a plain lookup."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
