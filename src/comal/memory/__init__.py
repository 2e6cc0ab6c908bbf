"""Memory across sessions (MEM-1, MEM-2): facts saved before anything is summarized, and found
again by the same agent in any later session.

- :func:`remember` is the memory flush: every stand-in that compresses entries (the dag's
  summaries, the pipeline's summary, the limit engine's checkpoint) calls it over the entries it
  stands for, in the transaction that stores it. Facts come from :func:`extract_facts`, the
  deterministic extractor (commands with exit codes, decisions, preferences, dates, names,
  paths, identifiers), plus a configured model summarizer's own (:class:`Extracted`).
- :func:`memory_search` ranks one agent's memories and its past sessions' entries together,
  exact matches first, each result saying why it matched (:class:`Match`); the
  ``memory_search`` operation (:mod:`comal.ops`) and ``comal memory search`` both call it.
- :func:`add_note`, :func:`list_memories` and :func:`forget` are memory a person manages
  (DRV-7): ``comal memory add|list|forget``, the TUI's ``#`` and the web page's call them.

The rows live in the ledger (``memories``, ``memory_flushes``; :mod:`comal.ledger`).
"""

from ._extract import KINDS, MAX_FACTS, extract_facts
from ._manage import (
    MemoryPage,
    add_note,
    forget,
    list_memories,
    memory_dict,
    parse_note,
    render_forget,
    render_note,
    render_page,
    source_of,
)
from ._remember import EXTRACTIVE, Extracted, remember, unremembered
from ._search import LEGACY_STEP_AGENT, Recalled, memory_search, render_recalled
from ._why import Match

__all__ = [
    "EXTRACTIVE",
    "KINDS",
    "LEGACY_STEP_AGENT",
    "MAX_FACTS",
    "Extracted",
    "Match",
    "MemoryPage",
    "Recalled",
    "add_note",
    "extract_facts",
    "forget",
    "list_memories",
    "memory_dict",
    "memory_search",
    "parse_note",
    "remember",
    "render_forget",
    "render_note",
    "render_page",
    "render_recalled",
    "source_of",
    "unremembered",
]
