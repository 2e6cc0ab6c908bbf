"""Errors of the house (:mod:`comal.ops`), each under the :mod:`comal.errors` class a caller
would already catch::

    OpsError                                root of this package's errors
    ├── OperationDeclarationError (UserError) an operation or registry declared inconsistently
    ├── WorkspaceEscape (ScopeError)        a path that resolves outside the workspace root
    ├── ToolFailure (UserError)             a handler's expected failure, told to the model
    │   └── OperationTimeout                the handler ran out of its time limit
    └── McpServerError                      an MCP server could not be started, listed or called

Judgments are values, not exceptions: a denied or rejected proposal returns a
:class:`~comal.ops.Decision` and leaves a receipt; these errors are for misuse and for failures
inside an authorised execution.
"""

from __future__ import annotations

from ..errors import ComalError, ScopeError, UserError

__all__ = [
    "McpServerError",
    "OperationDeclarationError",
    "OperationTimeout",
    "OpsError",
    "ToolFailure",
    "WorkspaceEscape",
]


class OpsError(ComalError):
    code = "OPS_ERROR"


class OperationDeclarationError(OpsError, UserError):
    code = "OPERATION_DECLARATION"


class WorkspaceEscape(OpsError, ScopeError):
    """A file path outside the workspace root (after resolving ``..`` and symlinks)."""

    code = "WORKSPACE_ESCAPE"


class ToolFailure(OpsError, UserError):
    """An expected failure of an authorised call; its message becomes the error result."""

    code = "TOOL_FAILURE"


class OperationTimeout(ToolFailure):
    code = "OPERATION_TIMEOUT"


class McpServerError(OpsError):
    code = "MCP_SERVER"
