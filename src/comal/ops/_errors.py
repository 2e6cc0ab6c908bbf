"""Errors of the house (:mod:`comal.ops`), each under the :mod:`comal.errors` class a caller
would already catch::

    OpsError                                root of this package's errors
    ├── OperationDeclarationError (UserError) an operation or registry declared inconsistently
    ├── WorkspaceEscape (ScopeError)        a path that resolves outside the workspace root
    ├── ToolFailure (UserError)             a handler's expected failure, told to the model
    │   ├── OperationTimeout                the handler ran out of its time limit
    │   ├── NotRegularFile                  a FIFO, device, socket or directory where a file was due
    │   ├── SymlinkLoop                     a path whose symbolic links never end (ELOOP)
    │   ├── RegexUnsupported                a pattern the linear-time engine (RE2) cannot run
    │   ├── SandboxUnavailable              Bash needs the OS sandbox and this machine has none
    │   └── MemoryCapExceeded               a sandboxed process ran out of its memory cap
    └── McpServerError                      an MCP server could not be started, listed or called

Every one of them that a handler raises becomes an error result and a receipt whose
observations carry its ``code`` (and the ``errno`` name of an underlying OS error); none leaves
the house as an exception.

Judgments are values, not exceptions: a denied or rejected proposal returns a
:class:`~comal.ops.Decision` and leaves a receipt; these errors are for misuse and for failures
inside an authorised execution.
"""

from __future__ import annotations

from ..errors import ComalError, ScopeError, UserError

__all__ = [
    "McpServerError",
    "MemoryCapExceeded",
    "NotRegularFile",
    "OperationDeclarationError",
    "OperationTimeout",
    "OpsError",
    "RegexUnsupported",
    "SandboxUnavailable",
    "SymlinkLoop",
    "ToolFailure",
    "WorkspaceEscape",
]


class OpsError(ComalError):
    code = "OPS_ERROR"


class OperationDeclarationError(OpsError, UserError):
    code = "OPERATION_DECLARATION"


class WorkspaceEscape(OpsError, ScopeError):
    """A file path outside the workspace root (after resolving ``..`` and symlinks), or a
    judged path that a racing process turned into a symbolic link before it was opened."""

    code = "WORKSPACE_ESCAPE"


class ToolFailure(OpsError, UserError):
    """An expected failure of an authorised call; its message becomes the error result."""

    code = "TOOL_FAILURE"


class OperationTimeout(ToolFailure):
    code = "OPERATION_TIMEOUT"


class NotRegularFile(ToolFailure):
    """Only regular files are read or replaced: a FIFO would block, a device has no end."""

    code = "NOT_REGULAR_FILE"


class SymlinkLoop(ToolFailure):
    code = "SYMLINK_LOOP"


class RegexUnsupported(ToolFailure):
    """User patterns run on RE2 (linear time); backreferences and lookaround are refused
    rather than handed to a backtracking engine."""

    code = "REGEX_UNSUPPORTED"


class SandboxUnavailable(ToolFailure):
    code = "SANDBOX_UNAVAILABLE"


class MemoryCapExceeded(ToolFailure):
    """A sandboxed process failed to allocate under ``sandbox.memory_cap`` (its error output
    says so); the receipt keeps what it wrote and carries this code."""

    code = "MEMORY_CAP"


class McpServerError(OpsError):
    code = "MCP_SERVER"
