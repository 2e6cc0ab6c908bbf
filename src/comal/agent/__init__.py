"""The agent: the turn loop, sessions, locks, crash-safe resume and the spend guard.

::

    scope = start_session(ledger, "local", "comal")
    house = House.of(ledger, scope, default_registry(), Policy.from_config({"mode": "trusted"}),
                  workspace=Workspace("."))
    agent = Agent(ledger, scope, provider, house, AgentSettings.for_model("claude-sonnet-4-6"))
    with lock_session(ledger, scope):
        result = agent.run("fix the failing test")      # RunResult: status, answer, receipts

    # later, in a new process, after a crash or a kill:
    with lock_session(ledger, scope):
        Agent(ledger, scope, provider, house, settings).resume()   # no new prompt (RES-1)

The loop is :class:`Agent` (see :mod:`comal.agent._agent`); a proposal — assembly, the spend
guard (TOK-6), the model call, OUTPUT_LENGTH / CONTEXT_LENGTH handling (OUT-1..3) — is
:class:`Proposer`; configuration (CFG-1/2) is :func:`load_config` and :class:`Config`
(:func:`explain_config` says where each value came from); the prompt cache (CCH-1..4) is
:mod:`comal.agent._cache` and :mod:`comal.agent._catalog`;
``--model script:PATH`` is :class:`ScriptModel`, a provider of :mod:`comal.providers.script`
re-exported here.
"""

from .._config_file import ConfigNotFound
from ..providers.script import SCRIPT_PREFIX, ScriptEnded, ScriptModel
from ._agent import Agent, Preamble
from ._cache import (
    CACHE_BREAK_EVENT,
    CACHE_EDIT_EVENT,
    RETENTION_EVENT,
    CacheConfig,
    request_saving,
    session_saving,
)
from ._catalog import CATALOG_EVENT, TOOL_SEARCH
from ._config import (
    OPERATOR_ONLY,
    AgentProfile,
    Config,
    SpendConfig,
    check_config,
    config_path,
    load_config,
    policy_from_config,
    settings_from_config,
)
from ._config_reference import configuration_reference
from ._config_show import Setting, explain_config
from ._errors import (
    AgentError,
    BudgetLimited,
    DuplicateCallIds,
    HookStopped,
    IncompleteResponse,
    RepeatedContextLength,
    RepeatedOutputLength,
    SessionLocked,
    SpendCapExceeded,
)
from ._houses import house_factory
from ._human import (
    HUMAN_OPERATIONS,
    HostControls,
    HumanOperationFailed,
    context_report,
    raise_for,
    render_report,
    window_note,
)
from ._instructions import (
    INSTRUCTIONS_EVENT,
    InstructionFiles,
    Instructions,
    recorded_instructions,
)
from ._interrupt import Interrupted, Interrupter
from ._lengths import CONTEXT_EVENT, INCOMPLETE_EVENT
from ._lifecycle import PromptBlocked
from ._liveness import LIVENESS, RUN_ENDED, Liveness, liveness
from ._lock import SessionLock, lock_path
from ._opening import check_prompt, resumable
from ._propose import COMPACT_APPLIED, COMPACT_REQUESTED, Proposal, Proposer, queued_compactions
from ._queue import Queued, enqueue
from ._queue import pending as pending_messages
from ._result import RunResult, answer_of, run_usage
from ._runtime import Flags, Runtime, Watch
from ._serve_settings import ServeSettings
from ._session import Check, lock_session, run_checks, spawn_child, start_session
from ._settings import DEFAULT_SYSTEM, AgentSettings, TaskBudget, WorkSettings
from ._spend import Spend, SpendCaps, check_spend, spent

__all__ = [
    "CACHE_BREAK_EVENT",
    "CACHE_EDIT_EVENT",
    "CATALOG_EVENT",
    "COMPACT_APPLIED",
    "COMPACT_REQUESTED",
    "CONTEXT_EVENT",
    "DEFAULT_SYSTEM",
    "HUMAN_OPERATIONS",
    "INCOMPLETE_EVENT",
    "INSTRUCTIONS_EVENT",
    "LIVENESS",
    "OPERATOR_ONLY",
    "RETENTION_EVENT",
    "RUN_ENDED",
    "SCRIPT_PREFIX",
    "TOOL_SEARCH",
    "Agent",
    "AgentError",
    "AgentProfile",
    "AgentSettings",
    "BudgetLimited",
    "CacheConfig",
    "Check",
    "Config",
    "ConfigNotFound",
    "DuplicateCallIds",
    "Flags",
    "HookStopped",
    "HostControls",
    "HumanOperationFailed",
    "IncompleteResponse",
    "InstructionFiles",
    "Instructions",
    "Interrupted",
    "Interrupter",
    "Liveness",
    "Preamble",
    "PromptBlocked",
    "Proposal",
    "Proposer",
    "Queued",
    "RepeatedContextLength",
    "RepeatedOutputLength",
    "RunResult",
    "Runtime",
    "ScriptEnded",
    "ScriptModel",
    "ServeSettings",
    "SessionLock",
    "SessionLocked",
    "Setting",
    "Spend",
    "SpendCapExceeded",
    "SpendCaps",
    "SpendConfig",
    "TaskBudget",
    "Watch",
    "WorkSettings",
    "answer_of",
    "check_config",
    "check_prompt",
    "check_spend",
    "config_path",
    "configuration_reference",
    "context_report",
    "enqueue",
    "explain_config",
    "house_factory",
    "liveness",
    "load_config",
    "lock_path",
    "lock_session",
    "pending_messages",
    "policy_from_config",
    "queued_compactions",
    "raise_for",
    "recorded_instructions",
    "render_report",
    "request_saving",
    "resumable",
    "run_checks",
    "run_usage",
    "session_saving",
    "settings_from_config",
    "spawn_child",
    "spent",
    "start_session",
    "window_note",
]
