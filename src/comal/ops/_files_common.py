"""What the native file tools share: strict argument models, the call's clock, and the kind of
a judged path (a regular file or a directory, never a link that appeared after judgment)."""

from __future__ import annotations

import os
import stat
import time

from pydantic import BaseModel, ConfigDict

from ._errors import NotRegularFile, OperationTimeout, ToolFailure, WorkspaceEscape
from ._model import CallContext
from ._workspace import Workspace, file_kind

PATH_HELP = "File path, relative to the workspace root (or absolute inside it)."
# How much of a file is looked at to tell text from binary.
SNIFF = 8192


class StrictArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Clock:
    """The call's time limit for native tools that loop over files or lines."""

    def __init__(self, ctx: CallContext) -> None:
        self.seconds = ctx.timeout
        self.deadline = time.monotonic() + ctx.timeout

    def check(self, what: str) -> None:
        if time.monotonic() > self.deadline:
            raise OperationTimeout(f"{what} ran out of its {self.seconds:g}s time limit")


def path_kind(ws: Workspace, rel: str) -> str:
    """``file`` or ``dir`` for the judged path ``rel``; anything else is refused."""
    if rel == ".":
        return "dir"
    with ws.parent(rel) as handle:
        st = None
        if handle.fd is not None:
            try:
                st = os.stat(handle.name, dir_fd=handle.fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
        if st is None:
            raise ToolFailure(f"{rel} does not exist; check the path with Glob")
    if stat.S_ISLNK(st.st_mode):
        raise WorkspaceEscape(f"{rel} became a symbolic link after it was judged; nothing was read")
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode):
        return "file"
    raise NotRegularFile(f"{rel} is {file_kind(st.st_mode)}, not a regular file or a directory")
