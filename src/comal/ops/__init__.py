"""The house: operations, judgment, receipts and the native tools (OPS-1..7, RES-3/4, PIP-3).

The model proposes; the house judges, executes and leaves a receipt::

    registry = default_registry()                        # one registry, every surface
    house = House.of(ledger, scope, registry, Policy.from_config({"allow": ["Bash(git *)"]}),
                  workspace=Workspace("."), approver=PromptApprover(Actor.user("ana")))
    tools = house.catalog("model").tools("anthropic")    # what the model is offered
    with lock_session(ledger, scope):                    # comal.agent: one writer a session
        outcome, receipt = house.handle(call, Actor.user("ana"), join_step=step)

A call with effects runs only while this process holds the session's lock (the house's guard,
:class:`SessionGuard` unless another is given; :class:`SessionNotHeld` otherwise), so two
writers cannot split a session's steps; :func:`unguarded` opts out explicitly.

File tools are confined by :class:`Workspace`, which resolves and opens paths component by
component relative to a directory descriptor, so no racing process can move a call out of the
workspace. Bash runs in the OS sandbox (:class:`Sandbox`, bubblewrap): read-only root, the
workspace writable, comal's own files masked, no network unless the policy allows it, its own
PID namespace; :func:`sandbox_status` says whether it is available and active. ``Bash(...)``
pattern rules are advisory; the sandbox is the enforcement.

After a crash, :func:`reconcile` turns preparations without receipts into
``postcondition_observed``, ``not_applied`` (a native write proven not to have landed: the call
is pending again) or ``uncertain`` receipts, and :func:`may_retry` says whether a call may be
repeated automatically (never when uncertain). An operation with effects may declare an
``intent`` (recorded in its preparation) and a recovery adapter that observes it afresh
(:class:`RecoveryAdapter`, PLG-2); without one its started calls stay ``uncertain``.
"""

from typing import TYPE_CHECKING, Any

from .._labels import judgment_label
from ._approval import Approval, ApprovalRequest, Approver, CallbackApprover, PromptApprover
from ._bash import BashArgs, BashRun, run_bash
from ._controls import HUMAN_CONTROLS, human_controls, is_human_control
from ._errors import (
    McpListingTooLarge,
    McpServerError,
    McpServerTimeout,
    McpToolRefused,
    MemoryCapExceeded,
    NotRegularFile,
    OperationDeclarationError,
    OperationTimeout,
    OpsError,
    RegexUnsupported,
    SandboxUnavailable,
    SessionContended,
    SessionNotHeld,
    SymlinkLoop,
    ToolFailure,
    WorkspaceEscape,
)
from ._evidence_op import EvidenceReadInput, read_page
from ._files import EditArgs, GlobArgs, GrepArgs, ReadArgs, WriteArgs
from ._guard import OUTPUT_KIND, StoredOutput, guard_output, read_output
from ._held import SessionGuard, holds_session, unguarded
from ._house import House, HouseFactory, Outcome, Probe
from ._judge import IDENTITY_KEYS, Judge, Judgment
from ._mcp_config import McpLimits, McpServerConfig
from ._model import (
    MODES,
    READ_ONLY_EFFECTS,
    SURFACES,
    Actor,
    Audience,
    CallContext,
    Decision,
    Disposition,
    Effect,
    EffectKind,
    HostSettings,
    Mode,
    Part,
    PlannedWrite,
    Status,
    Surface,
    ToolOutput,
)
from ._native import default_registry, native_operations
from ._operation import (
    DEFAULT_CAP,
    HARD_CAP,
    LARGE_CAP,
    Catalog,
    CatalogFormat,
    FinishGate,
    Handler,
    Intent,
    Operation,
    Planner,
    Registry,
)
from ._policy import Limits, Policy, Rule
from ._receipt import RECEIPT_SCHEMA, OutputInfo, Receipt, RetryVerdict, may_retry, receipts
from ._reconcile import Reconciled, ReconcileReport, reconcile
from ._recovery import Observed, RecoveryAdapter, RecoveryContext
from ._running import LIVE_CAP, OnOutput, OutputStream, StopSignal, interrupted_note, not_run
from ._sandbox import (
    DEFAULT_MEMORY_CAP,
    Sandbox,
    SandboxPolicy,
    SandboxStatus,
    default_protected_paths,
    out_of_memory,
    sandbox_status,
)
from ._shell import CommandView, Invocation, view_command
from ._spool import DEFAULT_OUTPUT_CAP, Captured, Spool
from ._workspace import DirHandle, Workspace, atomic_write

if TYPE_CHECKING:
    from ._mcp import McpServer, model_from_schema


def __getattr__(name: str) -> Any:
    # The MCP SDK takes half a second to import; only hosts that use MCP servers pay for it.
    if name in ("McpServer", "model_from_schema"):
        from . import _mcp

        return getattr(_mcp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_CAP",
    "DEFAULT_MEMORY_CAP",
    "DEFAULT_OUTPUT_CAP",
    "HARD_CAP",
    "HUMAN_CONTROLS",
    "IDENTITY_KEYS",
    "LARGE_CAP",
    "LIVE_CAP",
    "MODES",
    "OUTPUT_KIND",
    "READ_ONLY_EFFECTS",
    "RECEIPT_SCHEMA",
    "SURFACES",
    "Actor",
    "Approval",
    "ApprovalRequest",
    "Approver",
    "Audience",
    "BashArgs",
    "BashRun",
    "CallContext",
    "CallbackApprover",
    "Captured",
    "Catalog",
    "CatalogFormat",
    "CommandView",
    "Decision",
    "DirHandle",
    "Disposition",
    "EditArgs",
    "Effect",
    "EffectKind",
    "EvidenceReadInput",
    "FinishGate",
    "GlobArgs",
    "GrepArgs",
    "Handler",
    "HostSettings",
    "House",
    "HouseFactory",
    "Intent",
    "Invocation",
    "Judge",
    "Judgment",
    "Limits",
    "McpLimits",
    "McpListingTooLarge",
    "McpServer",
    "McpServerConfig",
    "McpServerError",
    "McpServerTimeout",
    "McpToolRefused",
    "MemoryCapExceeded",
    "Mode",
    "NotRegularFile",
    "Observed",
    "OnOutput",
    "Operation",
    "OperationDeclarationError",
    "OperationTimeout",
    "OpsError",
    "Outcome",
    "OutputInfo",
    "OutputStream",
    "Part",
    "PlannedWrite",
    "Planner",
    "Policy",
    "Probe",
    "PromptApprover",
    "ReadArgs",
    "Receipt",
    "ReconcileReport",
    "Reconciled",
    "RecoveryAdapter",
    "RecoveryContext",
    "RegexUnsupported",
    "Registry",
    "RetryVerdict",
    "Rule",
    "Sandbox",
    "SandboxPolicy",
    "SandboxStatus",
    "SandboxUnavailable",
    "SessionContended",
    "SessionGuard",
    "SessionNotHeld",
    "Spool",
    "Status",
    "StopSignal",
    "StoredOutput",
    "Surface",
    "SymlinkLoop",
    "ToolFailure",
    "ToolOutput",
    "Workspace",
    "WorkspaceEscape",
    "WriteArgs",
    "atomic_write",
    "default_protected_paths",
    "default_registry",
    "guard_output",
    "holds_session",
    "human_controls",
    "interrupted_note",
    "is_human_control",
    "judgment_label",
    "may_retry",
    "model_from_schema",
    "native_operations",
    "not_run",
    "out_of_memory",
    "read_output",
    "read_page",
    "receipts",
    "reconcile",
    "run_bash",
    "sandbox_status",
    "unguarded",
    "view_command",
]
