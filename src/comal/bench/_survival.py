"""The exact-value survival rate of the dag engine's summaries (``comal bench compare``).

Each transcript is replayed through ``comal-dag`` (the extractive summarizer, in memory) at a
window. For every leaf summary made, the *exact values* of its chunk are collected: paths,
identifiers and numbers (:func:`comal.context.exact_values`) in the messages and call
arguments, and every command a call ran. Two shares are reported:

- ``in_summary``: values that appear verbatim in the summary's text;
- ``reachable``: values that ``ctx_search`` (any of the value's words, BM25, top 10) finds in
  an entry of that chunk whose text holds the value verbatim, i.e. one call away from the
  exact bytes.

Values are deduplicated per chunk; at most ``per_chunk`` of them (in sorted order) are looked up
with ``ctx_search``, so a chunk full of numbers does not dominate the count. A value with more
distinct words than a words search takes (a long command) is looked up by its first ones, as a
model told ``SEARCH_TOO_BROAD`` would shorten it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import exact_values, get_engine
from ..context.dag import DagConfig, render_entries
from ..ledger import MAX_WORDS, LedgerBackend, SummaryRecord
from ..tokens import Budget, TokenCounter
from ..turns import replay
from ._strategies import Session

__all__ = ["Survival", "survival"]


@dataclass(frozen=True, slots=True)
class Survival:
    window: int
    transcripts: int
    chunks: int
    values: int
    in_summary: int
    searched: int
    reachable: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "transcripts": self.transcripts,
            "chunks": self.chunks,
            "values": self.values,
            "in_summary": round(self.in_summary / max(self.values, 1), 4),
            "searched": self.searched,
            "reachable": round(self.reachable / max(self.searched, 1), 4),
        }


def _commands(session: Session, first: int, last: int) -> set[str]:
    out: set[str] = set()
    for e in session.entries:
        if first <= e.seq <= last:
            for call in e.message.tool_calls:
                try:
                    args = json.loads(call.arguments)
                except (ValueError, RecursionError):
                    continue
                cmd = args.get("command") if isinstance(args, dict) else None
                if isinstance(cmd, str) and cmd.strip():
                    out.add(cmd.strip())
    return out


def survival(
    ledger: LedgerBackend,
    sessions: Sequence[Session],
    window: int,
    counter: TokenCounter,
    *,
    per_chunk: int = 40,
    progress: Callable[[str], None] = lambda _: None,
) -> Survival:
    """See the module docstring; ``ledger`` holds the imported sessions (for ``ctx_search``)."""
    dag = get_engine("dag")
    config = DagConfig(counter=counter)
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    chunks = values = kept = searched = reachable = 0
    for session in sessions:
        progress(f"survival: {session.name} at {window:,}")
        made: list[SummaryRecord] = []
        for turn in replay(session.entries, session.scope.session, budget, config, engine=dag):
            made += [m for m in turn.made if isinstance(m, SummaryRecord) and m.kind == "leaf"]
        for leaf in made:
            chunk = [e for e in session.entries if leaf.first_seq <= e.seq <= leaf.last_seq]
            found = exact_values(render_entries(chunk)) | _commands(
                session, leaf.first_seq, leaf.last_seq
            )
            found = {v for v in found if len(v) >= 2}
            chunks += 1
            values += len(found)
            kept += sum(1 for v in found if v in leaf.text)
            for v in sorted(found)[:per_chunk]:
                searched += 1
                query = _searchable(v)
                hits = ledger.recall_search(session.scope, query, limit=10, summaries=False)
                by_id = {e.id: e for e in chunk}
                if any(h.id in by_id and v in by_id[h.id].message.text for h in hits):
                    reachable += 1
                elif any(h.id in by_id and v in render_entries([by_id[h.id]]) for h in hits):
                    reachable += 1
    return Survival(window, len(sessions), chunks, values, kept, searched, reachable)


def _searchable(value: str) -> str:
    """``value`` within the ledger's words limit: its first distinct words, in order."""
    words = list(dict.fromkeys(re.findall(r"\w+", value.lower())))  # as the ledger counts
    return value if len(words) <= MAX_WORDS else " ".join(words[:MAX_WORDS])
