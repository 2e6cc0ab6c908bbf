"""Finding and rebuilding bad summaries (ENG-3: ``comal doctor --summaries [--rebuild]``).

A summary is *bad* when it holds what the guards of :mod:`._dag` now refuse: an empty body, an
error reply, a body cut by an earlier comal at three times its target (:data:`CAP_MARKER`: a
truncation), or one not smaller than the entries it stands for. The ledger never rewrites a
row, so a bad summary is rebuilt by folding it, alone, into a new summary one depth up whose
body is the extractive summary of the entries it covers (no model, deterministic, bounded by
the condensed target, and named ``extractive`` in its header); the new node takes its place on
the frontier, so the next request shows the rebuilt text, and the bad row stays for the
record. A frontier node over a bad one (a condensed summary written from its text) is rebuilt
the same way; anything already folded under a good node was summarized again since.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import ExtractiveSummarizer, SummaryRequest
from ..context.dag import DagConfig, render_children, render_entries, sources_digest
from ..ledger import LedgerBackend, Scope, SummaryInput, SummaryRecord
from ..tokens import TokenCounter
from ._dag import _ERROR_REPLY, CAP_MARKER

__all__ = ["REBUILT", "SummaryFault", "bad_summaries", "rebuild_summaries", "summary_fault"]

REBUILT = "dag_rebuilt"
_CUT = CAP_MARKER.split("{", 1)[0]


@dataclass(frozen=True, slots=True)
class SummaryFault:
    session: str
    summary: int
    depth: int
    seq: tuple[int, int]
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "summary": self.summary,
            "depth": self.depth,
            "seq": list(self.seq),
            "why": self.why,
        }


def summary_fault(summary: SummaryRecord) -> str | None:
    """Why ``summary`` is bad (see the module docstring), or None."""
    text = summary.text
    if not text.strip():
        return "empty"
    if _CUT in text:
        return "cut at three times its target: a truncation stored as a summary"
    if _ERROR_REPLY.match(text):
        return "an error reply, not a summary"
    if summary.tokens >= summary.descendant_tokens:
        return (
            f"not smaller than its sources ({summary.tokens:,} >= "
            f"{summary.descendant_tokens:,} tokens)"
        )
    return None


def bad_summaries(ledger: LedgerBackend, scope: Scope) -> list[SummaryFault]:
    out = []
    for s in ledger.summaries(scope):
        why = summary_fault(s)
        if why is not None:
            out.append(SummaryFault(scope.session, s.id, s.depth, (s.first_seq, s.last_seq), why))
    return out


def _tainted(every: list[SummaryRecord]) -> dict[int, str]:
    """Summary ids whose text is bad or was written from a bad one's, with why."""
    why: dict[int, str] = {}
    for s in sorted(every, key=lambda r: r.depth):  # children before their parents
        own = summary_fault(s)
        if own is not None:
            why[s.id] = own
        elif any(c in why for c in s.children):
            why[s.id] = f"condensed from bad summary {next(c for c in s.children if c in why)}"
    return why


def rebuild_summaries(
    ledger: LedgerBackend, scope: Scope, config: DagConfig | None = None
) -> list[SummaryRecord]:
    """Rebuild every frontier summary that is bad or written from a bad one; the new rows."""
    config = config if config is not None else DagConfig(counter=ledger.counter)
    counter: TokenCounter = ledger.counter
    tainted = _tainted(ledger.summaries(scope))
    made = []
    for node in ledger.summary_frontier(scope):
        if node.id not in tainted:
            continue
        entries = ledger.entries(scope, start_seq=node.first_seq, end_seq=node.last_seq)
        sources = render_entries(entries)
        request = SummaryRequest(
            sources, node.depth + 1, config.condensed_target_tokens, "normal",
            max(1, sum(e.tokens for e in entries)),
        )  # fmt: skip
        text = ExtractiveSummarizer(counter).summarize(request).text
        meta: dict[str, Any] = {"v": 1, "engine": "comal.dag", "rebuilds": node.id}
        meta["why"] = tainted[node.id]
        for key in ("request_seq", "board", "task"):
            if key in node.meta:
                meta[key] = node.meta[key]
        draft = SummaryInput(
            kind="condensed",
            depth=node.depth + 1,
            first_seq=node.first_seq,
            last_seq=node.last_seq,
            children=(node.id,),
            descendant_count=node.descendant_count,
            descendant_tokens=node.descendant_tokens,
            time_range=node.time_range,
            text=text,
            summarizer="extractive",
            level="normal",
            # What ctx_expand returns of a condensed node: its child (the bad row, whose own
            # expansion gives the entries).
            sources_digest=sources_digest(render_children([node])),
            meta=meta,
        )
        with ledger.atomic():
            record = ledger.add_summary(scope, draft)
            body = {"v": 1, "summary": record.id, "rebuilds": node.id, "why": meta["why"]}
            ledger.add_record(scope, "event", REBUILT, body)
        made.append(record)
    return made
