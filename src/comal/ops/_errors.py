"""Errors of the house (:mod:`comal.ops`), each under the :mod:`comal.errors` class a caller
would already catch::

    OpsError                                root of this package's errors
    ├── OperationDeclarationError (UserError) an operation or registry declared inconsistently
    ├── WorkspaceEscape (ScopeError)        a path that resolves outside the workspace root
    ├── SessionContended (UserError)        another writer overtook the step a call's result joins
    ├── SessionNotHeld (UserError)          a call with effects, and this process lacks the lock
    ├── ToolFailure (UserError)             a handler's expected failure, told to the model
    │   ├── OperationTimeout                the handler ran out of its time limit
    │   ├── NotRegularFile                  a FIFO, device, socket or directory where a file was due
    │   ├── SymlinkLoop                     a path whose symbolic links never end (ELOOP)
    │   ├── RegexUnsupported                a pattern the linear-time engine (RE2) cannot run
    │   ├── SandboxUnavailable              Bash needs the OS sandbox and this machine has none
    │   └── MemoryCapExceeded               a sandboxed process ran out of its memory cap
    └── McpServerError                      an MCP server could not be started, listed or called
        ├── McpServerTimeout                its handshake or tool listing passed its time limit
        ├── McpListingTooLarge              its tool listing passed a bound (pages, tools, bytes)
        └── McpToolRefused                  one of its tools has a declaration comal refuses

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
    "McpListingTooLarge",
    "McpServerError",
    "McpServerTimeout",
    "McpToolRefused",
    "MemoryCapExceeded",
    "NotRegularFile",
    "OperationDeclarationError",
    "OperationTimeout",
    "OpsError",
    "RegexUnsupported",
    "SandboxUnavailable",
    "SessionContended",
    "SessionNotHeld",
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


class SessionContended(OpsError, UserError):
    """A call's result could not join its step: another writer (a second house on the session,
    without the session's lock) appended a newer step. Before execution it stops the call;
    after, the call's receipt is still recorded and this is raised once it is."""

    code = "SESSION_CONTENDED"


class SessionNotHeld(OpsError, UserError):
    """A call with effects (or an agent's run) on a session whose lock this process does not
    hold: refused before anything is written, so two writers cannot split its steps."""

    code = "SESSION_NOT_HELD"


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
    """``server`` names the server (``None`` where no server was named yet)."""

    code = "MCP_SERVER"

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


class McpServerTimeout(McpServerError):
    """``phase`` is ``handshake`` or ``listing``."""

    code = "MCP_SERVER_TIMEOUT"

    def __init__(self, message: str, *, server: str, phase: str) -> None:
        super().__init__(message, server=server)
        self.phase = phase


class McpListingTooLarge(McpServerError):
    """``limit`` is the bound passed: ``pages``, ``tools`` or ``bytes``."""

    code = "MCP_LISTING_LIMIT"

    def __init__(self, message: str, *, server: str, limit: str) -> None:
        super().__init__(message, server=server)
        self.limit = limit


class McpToolRefused(McpServerError):
    """A tool whose name or input schema comal cannot judge calls against; the server's
    other tools still load."""

    code = "MCP_TOOL_REFUSED"

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message, server=server)
        self.tool = tool
