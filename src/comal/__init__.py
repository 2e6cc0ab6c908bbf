"""comal: a context engine and governed runtime for long-running LLM agents.

The pieces most programs need are re-exported here; each subpackage has the rest:
:mod:`comal.messages` (values), :mod:`comal.ledger` (the store), :mod:`comal.tokens`,
:mod:`comal.context` (the engine), :mod:`comal.evidence`, :mod:`comal.ops` (the house),
:mod:`comal.providers`, :mod:`comal.importers`, :mod:`comal.testing`.
"""

from .context import Assembly, EngineConfig, View, assemble
from .errors import (
    BudgetError,
    ComalError,
    ContextLength,
    ContextOverhead,
    ContextPressureLoop,
    OutputLength,
    UserError,
)
from .evidence import read_evidence
from .ledger import Scope, SQLiteLedger, open_ledger, verify
from .messages import Message, Role, Text, ToolCall, ToolResult
from .tokens import Budget, Usage, default_counter, resolve_window

__version__ = "0.1.0"

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
