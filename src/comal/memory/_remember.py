"""``remember``: the memory flush every summarization makes first (MEM-1).

Every stand-in that compresses entries — the dag's leaf and condensed summaries, the pipeline's
summary, the limit engine's checkpoint, proposed by an assembly or by ``/compact`` — calls
:func:`remember` over the entries it stands for, inside the transaction that stores it. So a
crash leaves both or neither, and a stand-in never exists whose sources were not read for facts
first. The ledger flushes each seq once (:meth:`~comal.ledger.LedgerBackend.add_memories`):
a condensed summary over leaves already remembered, a checkpoint that extends the previous one,
a replay or a second sweep read nothing again.

Facts come from the deterministic extractor (:func:`extract_facts`), always; a configured model
summarizer adds its own (``extra``, extracted before the transaction, see
:mod:`comal.compaction`), never instead of them. A memory is always taken from the entries
themselves, never from a summary's text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..ledger import Entry, LedgerBackend, MemoryInput, Remembered, Scope
from ._extract import MAX_FACTS, bounded, extract_facts

__all__ = ["EXTRACTIVE", "Extracted", "remember", "unremembered"]

EXTRACTIVE = "extractive"
_BATCH = 1_000


@dataclass(frozen=True, slots=True)
class Extracted:
    """Facts a model extracted from some entries (seqs name them), and which model."""

    facts: tuple[MemoryInput, ...]
    extractor: str


def unremembered(
    ledger: LedgerBackend,
    scope: Scope,
    first_seq: int,
    last_seq: int,
    entries: Sequence[Entry] | None = None,
) -> Iterator[list[Entry]]:
    """The entries of ``first_seq..last_seq`` no flush has read yet, in batches: from
    ``entries`` where they hold a whole run, else read from the ledger."""
    given = {e.seq: e for e in entries or ()}
    for a, b in ledger.memory_gaps(scope, first_seq, last_seq):
        if all(s in given for s in range(a, b + 1)):
            yield [given[s] for s in range(a, b + 1)]
            continue
        for start in range(a, b + 1, _BATCH):
            yield ledger.entries(scope, start_seq=start, end_seq=min(b, start + _BATCH - 1))


def remember(
    ledger: LedgerBackend,
    scope: Scope,
    first_seq: int,
    last_seq: int,
    why: str,
    *,
    entries: Sequence[Entry] | None = None,
    extra: Extracted | None = None,
) -> Remembered:
    """Save the facts of entries ``first_seq..last_seq`` not remembered yet, before the stand-in
    ``why`` names (its event kind) compresses them; in the caller's transaction when there is
    one. ``entries`` spares reading what the caller holds already."""
    with ledger.atomic():
        facts: list[MemoryInput] = []
        for batch in unremembered(ledger, scope, first_seq, last_seq, entries):
            facts += extract_facts(batch)
        facts = bounded(facts)
        extractor = EXTRACTIVE
        if extra is not None and extra.facts:
            facts += extra.facts[:MAX_FACTS]
            extractor = f"{EXTRACTIVE}+{extra.extractor}"
        return ledger.add_memories(scope, first_seq, last_seq, facts, why=why, extractor=extractor)
