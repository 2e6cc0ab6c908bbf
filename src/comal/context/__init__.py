"""The default context engine, "memory to the limit" (LIM-1..6).

:func:`assemble` turns a :class:`View` of one session (the latest checkpoint and the entries
after it, read by :meth:`View.from_ledger`), a :class:`~comal.tokens.Budget` and an
:class:`EngineConfig` into an :class:`Assembly`: the messages to send (system first), what was
done to fit them (:data:`Action` values), OBS-1 metrics, and, when stage 2 fired, a
:class:`CheckpointProposal` for :func:`store_checkpoint`. Assembly is pure and deterministic:
the same view, budget and config give byte-identical messages.
"""

from ._assembly import (
    Action,
    Assembly,
    Bounded,
    Checkpointed,
    CheckpointProposal,
    EngineState,
    MediaReferenced,
    Metrics,
    ProtectedTailOverflow,
    Referenced,
)
from ._config import EngineConfig, Limits
from ._limit import assemble
from ._replay import (
    ReplayTurn,
    action_dict,
    compact,
    proposal_record,
    render_state,
    replay,
    split_view,
    work_state,
)
from ._report import budget_report
from ._view import View, store_checkpoint

__all__ = [
    "Action",
    "Assembly",
    "Bounded",
    "CheckpointProposal",
    "Checkpointed",
    "EngineConfig",
    "EngineState",
    "Limits",
    "MediaReferenced",
    "Metrics",
    "ProtectedTailOverflow",
    "Referenced",
    "ReplayTurn",
    "View",
    "action_dict",
    "assemble",
    "budget_report",
    "compact",
    "proposal_record",
    "render_state",
    "replay",
    "split_view",
    "store_checkpoint",
    "work_state",
]
