"""The native registry: file tools, the shell, evidence reads, the human controls, and the
operations of the enabled plugins (:mod:`comal.plugins`), judged by the house like the rest."""

from __future__ import annotations

from collections.abc import Callable

from ..plugins import PluginConflict
from ._bash import bash_operation
from ._controls import human_controls
from ._errors import OperationDeclarationError
from ._evidence_op import evidence_operation
from ._files import file_operations
from ._memory_search import memory_search_operation
from ._operation import Operation, Registry
from ._session_search import session_search_operation

__all__ = ["default_registry", "native_operations"]


def native_operations() -> list[Operation]:
    """Read, Write, Edit, Glob, Grep, Bash, EvidenceRead, session_search and memory_search."""
    return [
        *file_operations(),
        bash_operation(),
        evidence_operation(),
        session_search_operation(),
        memory_search_operation(),
    ]


def default_registry(*, login: Callable[[str], str] | None = None) -> Registry:
    """Native operations, the human controls (``login`` only with a host login flow) and the
    plugins' operations, the built-in ones included: the dag engine's recall tools come from its
    plugin (``comal-dag-recall``) and are offered to the model only under that engine."""
    registry = Registry([*native_operations(), *human_controls(login)])
    _add_plugin_operations(registry)
    return registry


def _add_plugin_operations(registry: Registry) -> None:
    from .. import plugins  # loaded on the first registry, not when comal.ops is imported

    for info in plugins.plugin_infos():
        for operation in info.operations:
            try:
                registry.add(operation)
            except OperationDeclarationError as exc:
                # A plugin cannot take a native operation's name (nothing is replaced).
                raise PluginConflict(f"plugin {info.name!r}: {exc}", plugin=info.name) from exc
