"""The coded errors of the work operations. Each is a :class:`~comal.ops.ToolFailure`, so the
house turns it into an error result whose receipt names the code, and the model reads why."""

from __future__ import annotations

from ..ops import ToolFailure

__all__ = [
    "BoardItemUnknown",
    "BoardOrderError",
    "DraftReferenceError",
    "FinishIncomplete",
    "FinishRefused",
    "NoWorkAgent",
    "WorkStepRefused",
]


class BoardItemUnknown(ToolFailure):
    """A board operation named an item the board does not have."""

    code = "BOARD_ITEM_UNKNOWN"


class BoardOrderError(ToolFailure):
    """An item marked done while an item it depends on is not."""

    code = "BOARD_DEPENDENCY_OPEN"


class WorkStepRefused(ToolFailure):
    """A WorkStepRun the house does not start: tools wider than the parent's, an engine or a
    model the operator did not allow, a step the session may not delegate."""

    code = "WORK_STEP_REFUSED"


class DraftReferenceError(ToolFailure):
    """A draft part that names no result of a direct child, or whose bytes no longer match
    the digest it was composed with."""

    code = "DRAFT_REFERENCE"


class FinishRefused(ToolFailure):
    """finish_call proposed beside other calls: it closes the session, so it comes alone."""

    code = "FINISH_ALONE"


class FinishIncomplete(ToolFailure):
    """finish_call with a work step that ended incomplete and that the call does not accept
    (``accept_incomplete``), or an acceptance that names no incomplete step."""

    code = "FINISH_INCOMPLETE"


class NoWorkAgent(ToolFailure):
    """An operation that needs the agent running the session, called where none runs it."""

    code = "WORK_AGENT_MISSING"
