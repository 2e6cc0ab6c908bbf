"""The task's state beside the dag's summaries (ENG-2, BRD-2).

Each summary's meta holds the task's state through the steps it covers (:mod:`.._task`,
folded onto the state of the summary before it when it was made); the newest one the frontier
holds is restored right after the summaries, and the steps an assembly evicts (DAG-4) are
folded onto it, so nothing of the task leaves the context with them. Like the carried request,
the block changes only when the frontier or the eviction does: never between two compactions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...ledger import Entry, SummaryRecord
from ...messages import Message, Role, Text
from .._task import TaskState, task_note
from .._view import View

__all__ = ["summary_task", "task_message"]


def summary_task(summary: SummaryRecord | None) -> TaskState:
    """The task's state a summary carries (a summary stored before states were kept carries
    its board only)."""
    if summary is None:
        return TaskState()
    task = summary.meta.get("task")
    if isinstance(task, dict):
        return TaskState.from_dict(task)
    board = summary.meta.get("board")
    return TaskState(board=dict(board)) if isinstance(board, dict) else TaskState()


def task_message(
    view: View, evicted: Sequence[Entry] = (), *, carried: Entry | None = None
) -> Message | None:
    """The block sent after the summaries: the newest summary's state, with the evicted
    entries folded on; without the goal when the carried request is the goal (it is sent
    verbatim already)."""
    newest = max(view.summaries, key=lambda s: s.last_seq, default=None)
    state = summary_task(newest)
    if evicted:
        state.fold(evicted)
    goal = state.goal
    note = task_note(state, goal=not (goal and carried is not None and goal["seq"] == carried.seq))
    return None if note is None else Message(Role.USER, (Text(note),))
