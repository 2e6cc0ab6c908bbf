"""The one registry of engines: a read-only mapping from name to engine, filled by the plugin
seam (:mod:`comal.plugins`): the engines this package ships (:mod:`._plugin`) and any an
enabled plugin adds. A name is registered once, so nothing can swap an engine in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ._engine import Engine, UnknownEngine

__all__ = ["ENGINES", "engine_names", "get_engine"]


def _engines() -> Mapping[str, Engine]:
    from .. import plugins  # the seam loads the engines on first use, not at import

    return plugins.engines()


class _Engines(Mapping[str, Engine]):
    """The plugins' engines, read-only: no item assignment, no registration at run time."""

    def __getitem__(self, name: str) -> Engine:
        return _engines()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(_engines())

    def __len__(self) -> int:
        return len(_engines())

    def __repr__(self) -> str:
        return f"ENGINES({', '.join(self)})"


ENGINES: Mapping[str, Engine] = _Engines()


def engine_names() -> tuple[str, ...]:
    return tuple(_engines())


def get_engine(name: str) -> Engine:
    """The engine called ``name``, or :class:`UnknownEngine` naming the ones there are."""
    engines = _engines()
    found = engines.get(name)
    if found is None:
        raise UnknownEngine(
            f"unknown context engine {name!r}; this comal has: {', '.join(engines)}. "
            "Set `engine` in the configuration or pass --engine with one of them."
        )
    return found
