"""The native registry: file tools, the shell, evidence reads and the human controls."""

from __future__ import annotations

from collections.abc import Callable

from ._bash import bash_operation
from ._controls import human_controls
from ._evidence_op import evidence_operation
from ._files import file_operations
from ._operation import Operation, Registry
from ._recall import recall_operations
from ._session_search import session_search_operation

__all__ = ["default_registry", "native_operations"]


def native_operations() -> list[Operation]:
    """Read, Write, Edit, Glob, Grep, Bash, EvidenceRead and session_search."""
    return [*file_operations(), bash_operation(), evidence_operation(), session_search_operation()]


def default_registry(*, login: Callable[[str], str] | None = None) -> Registry:
    """Native operations, the dag engine's recall tools (offered to the model only under that
    engine) and the human controls (``login`` only with a host login flow)."""
    return Registry([*native_operations(), *recall_operations(), *human_controls(login)])
