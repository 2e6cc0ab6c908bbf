"""Executing the maintenance engines plan (one layer above :mod:`comal.context`).

Engines are pure: :meth:`~comal.context.Engine.plan` only says what is due, as
:class:`~comal.context.Job` values. This package does it, through one table from job type to
handler (:mod:`._table`; engines register their handlers through the plugin seam): against the
ledger (:class:`Compactor`, each job in its own transaction; :func:`sweep_passes`, bounded
passes under the session's lease; :class:`Background`, one sweep at a time off the caller's
thread) or in memory for a replay (:func:`rehearse`) — with whatever I/O a job needs: for the
summarizing engines a :class:`~comal.context.Summarizer` (:class:`ProviderSummarizer` over a
model, or the extractive one), with escalation, validation, spend caps and a circuit breaker
(:class:`Guard`). Deciding what is due, turn after turn, is the turn service's
(:mod:`comal.turns`).
"""

from ._dag import CAP_MARKER, Made, SummarizerFailed, acceptable, make_text
from ._doctor import REBUILT, SummaryFault, bad_summaries, rebuild_summaries, summary_fault
from ._execute import Compactor, execute, rehearse
from ._guard import Guard, GuardState, guard_state
from ._handlers import (
    BLOCKED,
    CHECKPOINTED,
    CONDENSED,
    DEFERRED,
    FAILED,
    PIPELINE_SUMMARIZED,
    SUMMARIZED,
    stored_kind,
)
from ._provider import SUMMARIZER_SYSTEM, ProviderSummarizer, SummarizerModel, summary_prompt
from ._report import dag_report
from ._summarizers import build_summarizer, configured_summarizer
from ._sweep import Background, SweepLimits, sweep_passes
from ._table import (
    JobFailed,
    JobHandler,
    JobRun,
    Rehearsal,
    SweepReport,
    handler_for,
    handler_table,
    made_dict,
    summary_key,
)

__all__ = [
    "BLOCKED",
    "CAP_MARKER",
    "CHECKPOINTED",
    "CONDENSED",
    "DEFERRED",
    "FAILED",
    "PIPELINE_SUMMARIZED",
    "REBUILT",
    "SUMMARIZED",
    "SUMMARIZER_SYSTEM",
    "Background",
    "Compactor",
    "Guard",
    "GuardState",
    "JobFailed",
    "JobHandler",
    "JobRun",
    "Made",
    "ProviderSummarizer",
    "Rehearsal",
    "SummarizerFailed",
    "SummarizerModel",
    "SummaryFault",
    "SweepLimits",
    "SweepReport",
    "acceptable",
    "bad_summaries",
    "build_summarizer",
    "configured_summarizer",
    "dag_report",
    "execute",
    "guard_state",
    "handler_for",
    "handler_table",
    "made_dict",
    "make_text",
    "rebuild_summaries",
    "rehearse",
    "stored_kind",
    "summary_fault",
    "summary_key",
    "summary_prompt",
    "sweep_passes",
]
