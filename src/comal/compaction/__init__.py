"""Executing the maintenance engines plan (one layer above :mod:`comal.context`).

Engines are pure: :meth:`~comal.context.Engine.plan` only says what is due, as
:class:`~comal.context.Job` values. This package does it — against the ledger
(:func:`execute`, each job in its own transaction; :func:`sweep`, a bounded round under the
session's lease; :class:`Maintainer`, inline or deferred after each turn) or in memory for a
replay (:func:`memory_executor`) — with whatever I/O a job needs: for the dag engine's
summaries a :class:`~comal.context.Summarizer` (:class:`ProviderSummarizer` over a model, or the
extractive one), with escalation, validation, spend caps and a circuit breaker (:class:`Guard`).
"""

from ._dag import CAP_MARKER, Made, SummarizerFailed, acceptable, make_text
from ._execute import JobFailed, execute, memory_executor
from ._guard import Guard, GuardState, guard_state
from ._provider import SUMMARIZER_SYSTEM, ProviderSummarizer, SummarizerModel, summary_prompt
from ._report import dag_report
from ._summarizers import build_summarizer
from ._sweep import Background, Compactor, Maintainer, SweepReport, sweep

__all__ = [
    "CAP_MARKER",
    "SUMMARIZER_SYSTEM",
    "Background",
    "Compactor",
    "Guard",
    "GuardState",
    "JobFailed",
    "Made",
    "Maintainer",
    "ProviderSummarizer",
    "SummarizerFailed",
    "SummarizerModel",
    "SweepReport",
    "acceptable",
    "build_summarizer",
    "dag_report",
    "execute",
    "guard_state",
    "make_text",
    "memory_executor",
    "summary_prompt",
    "sweep",
]
