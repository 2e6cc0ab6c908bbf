"""comal: a context engine and governed runtime for long-running LLM agents.

The pieces most programs need are re-exported here; each subpackage has the rest:
:mod:`comal.messages` (values), :mod:`comal.ledger` (the store), :mod:`comal.tokens`,
:mod:`comal.context` (the engines), :mod:`comal.evidence`, :mod:`comal.ops` (the house),
:mod:`comal.agent`, :mod:`comal.providers`, :mod:`comal.importers`, :mod:`comal.testing`.

The re-exports load on first use (PEP 562): ``import comal.cli`` must not pay for every
engine and the house before it can print ``--help``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from .errors import (
    BudgetError,
    ComalError,
    ContextLength,
    ContextOverhead,
    ContextPressureLoop,
    OutputLength,
    UserError,
)

if TYPE_CHECKING:
    from .context import Assembly, EngineConfig, View, assemble
    from .evidence import read_evidence
    from .ledger import Scope, SQLiteLedger, open_ledger, verify
    from .messages import Message, Role, Text, ToolCall, ToolResult
    from .tokens import Budget, Usage, default_counter, resolve_window

__version__ = "0.1.0"

_LAZY = {
    "Assembly": ".context",
    "EngineConfig": ".context",
    "View": ".context",
    "assemble": ".context",
    "read_evidence": ".evidence",
    "Scope": ".ledger",
    "SQLiteLedger": ".ledger",
    "open_ledger": ".ledger",
    "verify": ".ledger",
    "Message": ".messages",
    "Role": ".messages",
    "Text": ".messages",
    "ToolCall": ".messages",
    "ToolResult": ".messages",
    "Budget": ".tokens",
    "Usage": ".tokens",
    "default_counter": ".tokens",
    "resolve_window": ".tokens",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Assembly",
    "Budget",
    "BudgetError",
    "ComalError",
    "ContextLength",
    "ContextOverhead",
    "ContextPressureLoop",
    "EngineConfig",
    "Message",
    "OutputLength",
    "Role",
    "SQLiteLedger",
    "Scope",
    "Text",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UserError",
    "View",
    "__version__",
    "assemble",
    "default_counter",
    "open_ledger",
    "read_evidence",
    "resolve_window",
    "verify",
]
