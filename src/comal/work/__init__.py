"""Long work: the board, delegated work steps, drafts and ``finish_call`` (BRD-1..3, WRK-1..5).

The operations live in the one registry (:func:`work_operations`); everything they change is
recorded in the ledger and read back from it, so a process that starts after a crash derives
the same board, steps and drafts:

- the board (:func:`board_of`) is folded from the receipts of ``BoardAdd``, ``BoardUpdate``
  and ``finish_call``, each carrying its changes; ``verified`` only from a check the house ran;
- a work step (:func:`delegations`, :func:`steps_of`) is a ``work_delegated`` event written
  with its child session before the child starts, and what it came to is read from the child's
  own session;
- a draft (:func:`drafts_of`, :func:`render_draft`) is a ``work_draft`` event holding
  references to child entries and their digests, rebuilt byte for byte on every read.

The handlers of ``WorkStepRun``, ``WorkStepWait`` and ``finish_call`` need the agent that runs
the session: it implements :class:`WorkAgent` (``comal.agent`` does), reached through the
house's host (:class:`WorkHost`). :func:`work_view` is what ``/state``, ``comal state``, the
TUI and the HTTP API show.
"""

from ._accept import accepted_incomplete
from ._board import BOARD_HEADER, BOARD_KINDS, STATUSES, Board, BoardItem, ItemStatus, board_of
from ._board_ops import board_operations, check_item
from ._drafts import DRAFT, Draft, draft_operation, drafts_of, render_draft
from ._errors import (
    BoardItemUnknown,
    BoardOrderError,
    DraftReferenceError,
    FinishIncomplete,
    FinishRefused,
    NoWorkAgent,
    WorkStepRefused,
)
from ._ops import (
    COORDINATOR_ONLY,
    FINISH,
    AcceptIncomplete,
    FinishInput,
    WorkAgent,
    WorkHost,
    WorkStepRunInput,
    WorkStepWaitInput,
    ensure_work_operations,
    work_operations,
)
from ._steps import (
    DELEGATED,
    ENDED,
    STARTED,
    Delegation,
    StepState,
    child_answer,
    delegation_for,
    delegations,
    step_state,
    steps_of,
)
from ._view import BUDGET_EVENT, FINISH_EVENT, render_work, work_view

__all__ = [
    "BOARD_HEADER",
    "BOARD_KINDS",
    "BUDGET_EVENT",
    "COORDINATOR_ONLY",
    "DELEGATED",
    "DRAFT",
    "ENDED",
    "FINISH",
    "FINISH_EVENT",
    "STARTED",
    "STATUSES",
    "AcceptIncomplete",
    "Board",
    "BoardItem",
    "BoardItemUnknown",
    "BoardOrderError",
    "Delegation",
    "Draft",
    "DraftReferenceError",
    "FinishIncomplete",
    "FinishInput",
    "FinishRefused",
    "ItemStatus",
    "NoWorkAgent",
    "StepState",
    "WorkAgent",
    "WorkHost",
    "WorkStepRefused",
    "WorkStepRunInput",
    "WorkStepWaitInput",
    "accepted_incomplete",
    "board_of",
    "board_operations",
    "check_item",
    "child_answer",
    "delegation_for",
    "delegations",
    "draft_operation",
    "drafts_of",
    "ensure_work_operations",
    "render_draft",
    "render_work",
    "step_state",
    "steps_of",
    "work_operations",
    "work_view",
]
