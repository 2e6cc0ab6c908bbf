"""Layer 9: the context re-injected after a summary (PIP-1): the workspace's instructions file
(passed in as text by the caller; the engine reads no files), the files the summarized steps
touched with the exact calls that read their content back, the request when the summary
covers it, the task's board as the summarized steps last showed it (BRD-2), and a resume
note. A pure function of the stored summary and the settings, so it is byte-identical on every
turn until the next summary. Paths and the last action are the model's
text: each is kept on its line (:func:`comal.safe_text.one_line`), so none can start a line
that passes for comal's."""

from __future__ import annotations

from dataclasses import replace

from ...messages import Message, Role, Text
from ...safe_text import one_line
from .._board import board_note
from .._render import message_tokens
from .._task import TaskState, task_note
from ._config import PipelineConfig
from ._context import Context
from ._summary import StoredSummary
from ._work import Work

__all__ = ["refold_restore", "restore_message"]


def refold_restore(before: Work, after: Work, stored: StoredSummary | None, ctx: Context) -> Work:
    """ENG-2: when the fit layer leaves tail steps out (over the window between two summaries,
    within the cooldown), what they did to the task is folded into the restored context, so the
    task's state stays in the request while they are out of it (until the next summary covers
    them)."""
    if stored is None or stored.restore.task is None:
        return after
    kept = {id(s) for s in after}
    cut = [s.entry for s in before if s.zone == "tail" and id(s) not in kept and s.entry]
    at = next((k for k, s in enumerate(after) if s.zone == "restore"), None)
    if not cut or at is None:
        return after
    task = TaskState.from_dict(stored.restore.task).fold(cut)
    data = replace(stored.restore, task=task.to_dict())
    message, _ = restore_message(replace(stored, restore=data), ctx.config)
    slot = after[at].with_message(message, message_tokens(ctx.counter, message), "restore")
    return (*after[:at], slot, *after[at + 1 :])


def restore_message(stored: StoredSummary, config: PipelineConfig) -> tuple[Message, int]:
    """The restore message and how many characters of the instructions file it carries."""
    data = stored.restore
    record = stored.record
    blocks = [
        f"[Context restored after the summary of seq {record.first_seq}..{record.last_seq} "
        "(comal pipeline). Nothing was deleted; the ledger keeps every entry.]"
    ]
    chars = 0
    text = config.instructions.strip()
    if text and config.instructions_max_chars:
        shown = text[: config.instructions_max_chars]
        chars = len(shown)
        cut = (
            f"\n[… cut at {chars:,} of {len(text):,} characters; read {config.instructions_source}"
            " again for the rest]"
            if len(shown) < len(text)
            else ""
        )
        blocks.append(
            f"Instructions from {config.instructions_source}, re-injected as written:\n{shown}{cut}"
        )
    files = data.files[: config.restore_recent_files]
    if files:
        lines = ["Files accessed before the summary (newest first):"]
        for f in files:
            line = f"- {one_line(f.path)}: {f.op} at seq {f.seq}"
            if f.recovery:
                line += f"; the content read then: {f.recovery}"
            lines.append(line)
        blocks.append("\n".join(lines))
    if data.request is not None:
        q = data.request
        blocks.append(f"The current request (seq {q.seq}), quoted exactly:\n{q.text}")
    if data.task is not None:
        # ENG-2: the goal, board, work steps and drafts as the summarized steps left them.
        note = task_note(TaskState.from_dict(data.task))
        if note is not None:
            blocks.append(note)
    elif data.board is not None:
        blocks.append(board_note(data.board))
    action = one_line(data.last_action)
    last = f" The last action before the summary: {action}." if action else ""
    blocks.append(
        "Resume: continue the task from where it stopped; do not start over." + last + " Use "
        "session_search(query=...) to find anything earlier in this session and EvidenceRead "
        "for exact text."
    )
    return Message(Role.USER, (Text("\n\n".join(blocks)),)), chars
