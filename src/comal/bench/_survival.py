"""The exact-value survival rate of the dag engine's summaries (``comal bench compare``, ENG-4).

Each transcript is replayed through ``comal-dag`` (the extractive summarizer, in memory) at a
window. For every leaf summary made, the *exact values* of its chunk are collected: paths,
identifiers and numbers (:func:`comal.context.exact_values`) in what the summarizer read of its
messages (their text, the tools' outputs, the calls' arguments; not comal's own header lines:
seqs, times), and every command a call ran. Three shares are reported:

- ``in_summary``: values that appear verbatim in the summary's text;
- ``reachable``: values one ``ctx_search(query=value, within=summary)`` finds: an entry of
  the chunk among the 10 hits holds the value verbatim and the hit shows it (its snippet);
- ``reachable_session``: the same value with one session-wide ``ctx_search`` (any of the
  value's words, BM25, top 10), the measure before ``within``.

Values are deduplicated per chunk; at most ``per_chunk`` of them (in sorted order) are looked up,
so a chunk full of numbers does not dominate the count. A value longer than a query takes is
looked up by its start (a command by its first words, as a model told ``SEARCH_TOO_BROAD`` would
shorten it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..context import entry_text, exact_values, get_engine, search_within, values_of
from ..context.dag import DagConfig
from ..ledger import MAX_WORDS, LedgerBackend, SummaryRecord
from ..safe_text import one_line
from ..tokens import Budget, TokenCounter
from ..turns import replay
from ._strategies import Session

__all__ = ["QUERY_CHARS", "Survival", "survival"]

# The most a ctx_search query may be (CtxSearchInput.query's max_length).
QUERY_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class Survival:
    window: int
    transcripts: int
    chunks: int
    values: int
    in_summary: int
    searched: int
    reachable: int
    reachable_session: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "transcripts": self.transcripts,
            "chunks": self.chunks,
            "values": self.values,
            "in_summary": round(self.in_summary / max(self.values, 1), 4),
            "searched": self.searched,
            "reachable": round(self.reachable / max(self.searched, 1), 4),
            "reachable_session": round(self.reachable_session / max(self.searched, 1), 4),
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
    chunks = values = kept = searched = reachable = session_wide = 0
    for session in sessions:
        progress(f"survival: {session.name} at {window:,}")
        made: list[SummaryRecord] = []
        for turn in replay(session.entries, session.scope.session, budget, config, engine=dag):
            made += [m for m in turn.made if isinstance(m, SummaryRecord) and m.kind == "leaf"]
        for leaf in made:
            chunk = [e for e in session.entries if leaf.first_seq <= e.seq <= leaf.last_seq]
            found = exact_values(values_of(chunk)) | _commands(
                session, leaf.first_seq, leaf.last_seq
            )
            found = {v for v in found if len(v) >= 2}
            chunks += 1
            values += len(found)
            kept += sum(1 for v in found if v in leaf.text)
            by_id = {e.id: e for e in chunk}
            for v in sorted(found)[:per_chunk]:
                searched += 1
                query = v[:QUERY_CHARS]
                hits = search_within(chunk, query, 10)
                shown = one_line(query)  # a hit shows the matched text on one line
                if any(v in entry_text(h.entry) and shown in h.snippet for h in hits):
                    reachable += 1
                wide = ledger.recall_search(
                    session.scope, _searchable(v), limit=10, summaries=False
                )
                if any(h.id in by_id and v in entry_text(by_id[h.id]) for h in wide):
                    session_wide += 1
    return Survival(window, len(sessions), chunks, values, kept, searched, reachable, session_wide)


def _searchable(value: str) -> str:
    """``value`` within the ledger's words limit: its first distinct words, in order."""
    words = list(dict.fromkeys(re.findall(r"\w+", value.lower())))  # as the ledger counts
    return value if len(words) <= MAX_WORDS else " ".join(words[:MAX_WORDS])
