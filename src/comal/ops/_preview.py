"""What a proposed call would change, for the human asked to approve it.

A Write or Edit is shown as a unified diff of the file as it is now against the bytes the call
would leave there, read from the same function its planner uses (:func:`planned_bytes`), so
what is approved is what runs; a call that would fail says so instead. Other operations have no
preview here: their arguments say what they do (a Bash command is its ``command``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from pydantic import BaseModel

from ._errors import OpsError
from ._files import EditArgs, WriteArgs, planned_bytes
from ._workspace import Workspace

__all__ = ["change_preview"]

# A diff longer than this is cut (the approver still sees the path and its size).
_MAX_LINES = 400


def change_preview(
    args: BaseModel, workspace: Workspace | None, located: Mapping[str, str]
) -> str | None:
    """The diff a Write or Edit (``args``) would make to its path as the judge resolved it
    (``located``); ``None`` for any other operation."""
    if not isinstance(args, (WriteArgs, EditArgs)) or workspace is None:
        return None
    rel = located.get(args.path)
    if rel is None:
        return None
    try:
        before = workspace.read_bytes(rel)
        after, _ = planned_bytes(args, rel, before)
    except OpsError as exc:
        return f"this call would fail: {exc}"
    old = (before or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = after.decode("utf-8", "replace").splitlines(keepends=True)
    source = f"a/{rel}" if before is not None else "/dev/null"
    lines = list(difflib.unified_diff(old, new, source, f"b/{rel}"))
    if not lines:
        return f"{rel}: no change (the file already holds these bytes)"
    marker = "\n\\ No newline at end of file\n"
    shown = [line if line.endswith("\n") else line + marker for line in lines]
    text = "".join(shown[:_MAX_LINES])
    if len(shown) > _MAX_LINES:
        text += f"… {len(shown) - _MAX_LINES} more diff line(s)\n"
    return text.rstrip("\n")
