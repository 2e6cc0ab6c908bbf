"""The one turn service: how every surface runs a turn with a context engine.

A turn reads the session's view, budgets it, assembles the active memory, stores what the
assembly proposes, and after the reply runs the maintenance the engine plans. That path is
written once, here, and the agent, ``/compact``, the proxy, ``comal replay``, the benchmarks and
the compaction sweep all take it::

    service = ContextSession(ledger, scope, "dag", settings, system=(system_message,))
    budget = service.budget(window, system_tokens=..., tools_tokens=...)
    view = service.view()
    assembly = service.assemble(view, budget)
    service.commit(assembly, at=view.end_seq, since=previous_last_seq)   # checkpoint + events
    meta = service.meta(view, budget, assembly)                          # the request record
    ...                                                                  # the model call
    service.maintain(budget)                                             # after the turn

:func:`replay` is the same turn over entries in memory (nothing written). No other module calls
an engine's ``assemble`` or ``plan`` (a test walks the package to keep it so).
"""

from ._events import EVENT_KINDS, action_kind, assembly_events, is_new
from ._memory import MemoryStore
from ._replay import replay
from ._service import (
    Beside,
    BudgetFor,
    ContextSession,
    SummarizerSource,
    configure,
    sent_ranges,
    sweep,
)
from ._turn import SERVICE_FIELDS, Turn, TurnFieldOwned, unassembled_usage

__all__ = [
    "EVENT_KINDS",
    "SERVICE_FIELDS",
    "Beside",
    "BudgetFor",
    "ContextSession",
    "MemoryStore",
    "SummarizerSource",
    "Turn",
    "TurnFieldOwned",
    "action_kind",
    "assembly_events",
    "configure",
    "is_new",
    "replay",
    "sent_ranges",
    "sweep",
    "unassembled_usage",
]
