"""The browser plugin's hooks: enabled by the operator (``plugins: [comal.chrome]``)."""

from __future__ import annotations

from ..ops import Operation
from ..plugins import hookimpl
from ._ops import chrome_operations


@hookimpl
def comal_operations() -> list[Operation]:
    return chrome_operations()
