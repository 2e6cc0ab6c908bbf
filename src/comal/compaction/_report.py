"""What ``comal context`` and ``/context`` show of the dag engine (DAG-9, OBS-1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..context import Job
from ..context.dag import Blocked, Condense, DagConfig, Deferred, SummarizeLeaf
from ..ledger import LedgerBackend, Scope
from ._guard import guard_state

__all__ = ["dag_report"]


def dag_report(
    ledger: LedgerBackend,
    scope: Scope,
    pending_jobs: Sequence[Job],
    config: DagConfig | None = None,
) -> dict[str, Any]:
    """Summaries by depth, coverage, the frontier, ``pending_jobs`` (what the turn service
    plans now), spend, breaker and lease."""
    config = config if config is not None else DagConfig(counter=ledger.counter)
    every = ledger.summaries(scope)
    frontier = ledger.summary_frontier(scope)
    by_depth: dict[int, int] = {}
    for s in every:
        by_depth[s.depth] = by_depth.get(s.depth, 0) + 1
    info = ledger.session(scope)
    covered = max((s.last_seq for s in frontier), default=-1)
    pending: list[dict[str, Any]] = []
    for job in pending_jobs:
        if isinstance(job, SummarizeLeaf):
            pending.append(
                {"kind": "leaf", "first_seq": job.first_seq, "last_seq": job.last_seq,
                 "source_tokens": job.source_tokens}
            )  # fmt: skip
        elif isinstance(job, Condense):
            pending.append({"kind": "condense", "children": list(job.children), "depth": job.depth})
        elif isinstance(job, Blocked):
            pending.append({"kind": "blocked", "code": job.code, "message": job.message})
        elif isinstance(job, Deferred):
            # ENG-1: the debt, paid when the cache goes cold or at the hard threshold.
            pending.append(
                {"kind": "deferred", "history_tokens": job.history_tokens,
                 "hard_tokens": job.hard_tokens, "pays_back_after": job.pays_back_after}
            )  # fmt: skip
    lease = ledger.lease(scope)
    state = guard_state(ledger, scope, config)
    degraded = None
    if config.summarizer == "provider" and state.blocked is not None:
        degraded = f"count-only notes and eviction: {state.blocked}"
    return {
        "summaries": len(every),
        "by_depth": {str(d): n for d, n in sorted(by_depth.items())},
        "frontier": [
            {
                "id": s.id,
                "depth": s.depth,
                "seq": [s.first_seq, s.last_seq],
                "tokens": s.tokens,
                "level": s.level,
            }
            for s in frontier
        ],
        "covered_through_seq": covered,
        "covered_entries": sum(s.descendant_count for s in frontier),
        "session_entries": info.entries if info is not None else 0,
        "pending": pending,
        "summarizer": config.summarizer,
        "spend": state.as_dict(),
        "degraded": degraded,
        "lease": None if lease is None else {"owner": lease.owner, "expires_at": lease.expires_at},
    }
