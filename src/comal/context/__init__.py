"""Context engines: the active memory each request sends, assembled from the ledger.

Engines are plural and share one seam (:mod:`._engine`): a pure ``assemble(view, budget,
config)`` returning an :class:`Assembly` (the messages to send, system first; what was done to
fit them as :class:`Action` values; OBS-1 :class:`Metrics`; a checkpoint to store), and a pure
``plan(view, budget, config)`` returning the maintenance :class:`Job` values due. Surfaces look
engines up by name::

    engine = get_engine("limit")                      # ENGINES: the read-only registry
    view = View.from_ledger(ledger, scope, bases=engine.bases)
    assembly = engine.assemble(view, budget, engine.config_type(), cache=EngineCache())

Engines are registered through the plugin seam (:mod:`comal.plugins`, hook ``comal_engines``);
the ones this package ships are its built-in plugin (:mod:`._plugin`): ``limit`` (:mod:`.limit`,
the default: verbatim while it fits, then exact references, then a deterministic checkpoint;
LIM-1..7), ``dag`` (:mod:`.dag`: leaf and condensed summaries of old steps, kept in the ledger,
rendered honestly, with recall tools; DAG-1..9) and ``pipeline`` (:mod:`.pipeline`).
:class:`ExtractiveSummarizer` is the summarizer that needs no model.
:func:`assemble` and :class:`EngineConfig` at this level are the limit engine's, for callers
that need no other. Assembly is pure and deterministic: the same view, budget and config
give byte-identical messages.
"""

from ._assembly import (
    Action,
    Assembly,
    Bounded,
    Checkpointed,
    CheckpointProposal,
    MediaReferenced,
    Metrics,
    ProtectedTailOverflow,
    Referenced,
)
from ._board import BOARD_MARK, BOARD_TOOLS, board_in, board_note, newest_board
from ._engine import (
    Base,
    Engine,
    Job,
    StoreCheckpoint,
    UnknownEngine,
    config_counter,
    engine_config,
)
from ._extractive import (
    ExtractiveSummarizer,
    command_of,
    count_only_note,
    exact_values,
    exit_code,
)
from ._recall import WithinHit, entry_text, search_within, values_of
from ._registry import ENGINES, engine_names, get_engine
from ._render import EngineCache, error_excerpt
from ._replay import Bases, ReplayTurn, action_dict, proposal_record, split_view
from ._summarizer import LEVELS, Level, Summarizer, SummarizerPlan, SummaryRequest, SummaryText
from ._task import TaskState, task_note
from ._view import View, store_checkpoint
from .limit import (
    EngineConfig,
    EngineState,
    LimitEngine,
    Limits,
    WorkState,
    assemble,
    compact,
    render_state,
    step_groups,
    work_state,
)

__all__ = [
    "BOARD_MARK",
    "BOARD_TOOLS",
    "ENGINES",
    "LEVELS",
    "Action",
    "Assembly",
    "Base",
    "Bases",
    "Bounded",
    "CheckpointProposal",
    "Checkpointed",
    "Engine",
    "EngineCache",
    "EngineConfig",
    "EngineState",
    "ExtractiveSummarizer",
    "Job",
    "Level",
    "LimitEngine",
    "Limits",
    "MediaReferenced",
    "Metrics",
    "ProtectedTailOverflow",
    "Referenced",
    "ReplayTurn",
    "StoreCheckpoint",
    "Summarizer",
    "SummarizerPlan",
    "SummaryRequest",
    "SummaryText",
    "TaskState",
    "UnknownEngine",
    "View",
    "WithinHit",
    "WorkState",
    "action_dict",
    "assemble",
    "board_in",
    "board_note",
    "command_of",
    "compact",
    "config_counter",
    "count_only_note",
    "engine_config",
    "engine_names",
    "entry_text",
    "error_excerpt",
    "exact_values",
    "exit_code",
    "get_engine",
    "newest_board",
    "proposal_record",
    "render_state",
    "search_within",
    "split_view",
    "step_groups",
    "store_checkpoint",
    "task_note",
    "values_of",
    "work_state",
]
