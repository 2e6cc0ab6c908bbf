"""The task's board in the history (BRD-2): what every engine carries across its compactions.

The board is derived from receipts (:mod:`comal.work`), which engines do not read; but every
operation that changes or lists it ends its result with the whole board, after a line that
starts with :data:`BOARD_MARK`. So the newest such result in the entries a compaction covers is
the board as it stood there, and an engine keeps it: the limit engine in its checkpoint's work
state, the pipeline in the context it restores after a summary, the dag beside its summaries.
A pure function of stored entries, like the rest of an assembly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..ledger import Entry

__all__ = ["BOARD_MARK", "BOARD_TOOLS", "board_in", "board_note", "newest_board"]

BOARD_MARK = "[board]"
BOARD_TOOLS = frozenset({"BoardAdd", "BoardUpdate", "BoardList", "finish_call"})
_MARK = re.compile(r"(?m)^" + re.escape(BOARD_MARK))


def board_in(entry: Entry) -> dict[str, Any] | None:
    """The board a board operation's result ends with: ``{"seq", "entry", "tool", "text"}``."""
    result = entry.message.tool_result
    if result is None or result.name not in BOARD_TOOLS:
        return None
    found = _MARK.search(result.text)
    if found is None:
        return None
    return {
        "seq": entry.seq,
        "entry": entry.id,
        "tool": result.name,
        "text": result.text[found.start() :],
    }


def newest_board(entries: Iterable[Entry]) -> dict[str, Any] | None:
    newest = None
    for entry in entries:
        newest = board_in(entry) or newest
    return newest


def board_note(board: Mapping[str, Any]) -> str:
    """The board as an engine restores it after what covered it."""
    return (
        f"[comal: the task's board as of seq {board['seq']} ({board['tool']}), kept across "
        "the compaction; any newer change follows in the conversation, and BoardList shows it "
        f"now]\n{board['text']}"
    )
