"""Every error comal raises, rooted at :class:`ComalError`.

The tree::

    ComalError                      root; ``code`` is a stable machine-readable string
    ├── UserError                   misuse of the API or CLI (bad option, unknown session)
    │   └── ScopeError              a read or write whose (tenant, agent, session) is incomplete
    ├── InputError                  bad input data; names the file, line and field
    │   └── ImportFormatError       a transcript that cannot be imported as the given format
    ├── LedgerError                 the store refused or found a fault
    │   ├── LedgerIntegrityError    a stored row fails its digest or seal, or does not decode
    │   └── SchemaVersionError      the database was written by a newer comal
    ├── TokenizerUnavailable        the requested encoding cannot be loaded offline
    └── BudgetError                 the budget algebra cannot be satisfied
        ├── ContextOverhead         CONTEXT_OVERHEAD: instructions + tool schemas alone do not fit
        ├── ContextLength           CONTEXT_LENGTH: the provider rejected the input as too long
        ├── OutputLength            OUTPUT_LENGTH: the response did not finish
        └── ContextPressureLoop     CONTEXT_PRESSURE_LOOP: derivations stopped saving enough

Packages add leaves where they raise them, each also under the class a caller already catches:

- ``comal.ledger``: ``LedgerNotFound``, ``LedgerForeign``, ``LedgerNotADatabase``,
  ``LedgerIsADirectory``, ``LedgerReadOnly``, ``LedgerUnavailable``, ``LedgerBusy``
  (LedgerError); ``LedgerCorrupt``, ``LedgerRowDamaged``, ``LedgerKeyMismatch``,
  ``LedgerRolledBack`` (LedgerIntegrityError);
  ``LedgerBadTarget``, ``InvalidIdentifier``, ``SessionHasChildren``, ``MemorySearchTimeout``,
  ``MemoryNotFound`` (UserError);
- ``comal.evidence``: ``EvidenceError`` → ``EvidenceNotFound`` (UserError),
  ``EvidenceNotAllowed`` (ScopeError), ``EvidenceFieldError`` / ``EvidenceArgumentError``
  (UserError), ``EvidenceDigestMismatch`` / ``EvidenceCorrupt`` (LedgerIntegrityError);
- ``comal.context``: ``ProtectedTailOverflow`` (ContextPressureLoop);
- ``comal.ops``: ``OpsError`` → ``OperationDeclarationError`` (UserError), ``WorkspaceEscape``
  (ScopeError), ``SessionContended`` (UserError), ``ToolFailure`` → ``OperationTimeout``
  (UserError), ``McpServerError`` → ``McpServerTimeout``, ``McpListingTooLarge``,
  ``McpToolRefused``;
- ``comal.agent``: ``AgentError`` → ``SpendCapExceeded``, ``SessionLocked`` (UserError),
  ``IncompleteResponse``, ``RepeatedOutputLength`` (OutputLength), ``RepeatedContextLength``
  (ContextLength); ``ConfigNotFound`` (InputError), a configuration file named by
  ``COMAL_CONFIG`` or a flag that is not there; ``BudgetLimited`` (the task's budget is spent: a
  run's ``error``, not raised);
- ``comal.work``: ``BoardItemUnknown``, ``BoardOrderError``, ``WorkStepRefused``,
  ``DraftReferenceError``, ``FinishRefused``, ``NoWorkAgent`` (ToolFailure: error results whose
  receipts name the code);
- ``comal.providers``: ``ProviderConfigError`` → ``MissingAPIKey`` (UserError);
  ``ProviderError`` → connection, rate-limited, unavailable, auth, request and protocol errors;
  ``ContextLengthExceeded`` (ContextLength and ProviderError); ``comal.providers.script``:
  ``ScriptEnded`` (UserError), ``ScriptExhausted``;
- ``comal.plugins``: ``PluginError`` → ``PluginLoadError``, ``PluginHookError``,
  ``PluginConflict`` (UserError), each naming the plugin;
- ``comal.hooks``: ``HooksFileError`` (InputError, ``HOOKS_FILE``), a settings file named
  under ``hooks_from`` that is missing or holds no valid hooks;
- ``comal.integrations``: ``IntegrationUnavailable`` (a framework's extra is not installed) and
  ``IntegrationInput`` (an option or a framework value an adapter cannot use) (UserError);
- ``comal.cli``: ``OutputPathError`` (UserError), a file or folder a command cannot write;
  ``ListingError`` (UserError, ``SESSIONS_OPTION``), a ``comal sessions`` page or time it cannot
  read; ``ExportFormatError`` (UserError, ``EXPORT_FORMAT``), a ``comal export --format`` it
  does not write, said with those it does;
- ``comal.serve``: ``RequestRefused`` (UserError) → ``HostNotAllowed``, ``OriginNotAllowed``,
  ``KeyInURL``, ``RequestTimeout``, each with its HTTP status; ``JSONTooDeep``,
  ``ToolPairsBroken`` (InputError); ``CannotListen`` → ``AddressInUse`` (UserError), an address
  ``comal serve`` cannot listen on, said before it starts; the web interface's
  ``WorkspaceNotAllowed``, ``ModelNotAllowed``, ``ModeNotAllowed`` (the operator's lists and
  mode ceiling), ``AgentBusy`` and ``OwnerNotAnswering`` (the process that runs a session did
  not take a request in time) (UserError).

Messages say what was wrong, where, and end with what to do about it.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "ComalError",
    "ContextLength",
    "ContextOverhead",
    "ContextPressureLoop",
    "ImportFormatError",
    "InputError",
    "LedgerError",
    "LedgerIntegrityError",
    "OutputLength",
    "SchemaVersionError",
    "ScopeError",
    "TokenizerUnavailable",
    "UserError",
]


class ComalError(Exception):
    """Root of every comal error. ``code`` is stable across releases."""

    code: str = "COMAL_ERROR"


class UserError(ComalError):
    code = "USER_ERROR"


class ScopeError(UserError):
    """A ledger access whose tenant, agent or session is missing (LED-2: fail closed)."""

    code = "SCOPE_INCOMPLETE"


class InputError(ComalError):
    """Bad input data. ``path``, ``line`` and ``field`` locate the fault when known."""

    code = "INPUT_ERROR"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = []
        if path is not None:
            where.append(path if line is None else f"{path}:{line}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.reason = message


class ImportFormatError(InputError):
    code = "IMPORT_FORMAT"


class LedgerError(ComalError):
    code = "LEDGER_ERROR"


class LedgerIntegrityError(LedgerError):
    code = "LEDGER_INTEGRITY"


class SchemaVersionError(LedgerError):
    code = "SCHEMA_VERSION"


class TokenizerUnavailable(ComalError):
    code = "TOKENIZER_UNAVAILABLE"


class BudgetError(ComalError):
    code = "BUDGET_ERROR"


class ContextOverhead(BudgetError):
    """TOK-5: the fixed part of the prompt does not fit; no request may be sent."""

    code = "CONTEXT_OVERHEAD"


class ContextLength(BudgetError):
    """OUT-1: the provider rejected the input as too long."""

    code = "CONTEXT_LENGTH"


class OutputLength(BudgetError):
    """OUT-1: the response stopped because it ran out of output tokens."""

    code = "OUTPUT_LENGTH"


class ContextPressureLoop(BudgetError):
    """LIM-5: repeated derivations each saved too little; the engine stopped."""

    code = "CONTEXT_PRESSURE_LOOP"
