"""Walking a directory of the workspace for Glob and Grep: iteratively, following no link,
within a depth and an entry bound that the result reports.

A model can make any tree it likes with Write, 2,500 directories deep or a million files wide.
``os.fwalk`` recurses (a Python frame per level: ``RecursionError`` near a thousand) and holds
a descriptor per level. Here the walk keeps an explicit stack holding the descriptors of the
directories on the current path only, so it never recurses; directories deeper than
``max_depth`` are not entered (which also bounds the descriptors it holds), and the walk stops
after ``max_entries`` names. :class:`Walk` says what each bound left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._workspace import Workspace

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "Walk"]

MAX_DEPTH = 256
MAX_ENTRIES = 100_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _open_child(parent: int, name: str) -> int | None:
    try:
        # O_NOFOLLOW | O_DIRECTORY: a link, or a directory swapped for one, is not entered.
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None


def _next(stack: list[tuple[str, int, Iterator[str]]]) -> tuple[str, int] | None:
    """The next directory to walk, opened, closing those that are done; None at the end."""
    while stack:
        top, held, pending = stack[-1]
        name = next(pending, None)
        if name is None:
            stack.pop()
            os.close(held)
            continue
        child = _open_child(held, name)
        if child is not None:
            return (name if top == "." else f"{top}/{name}"), child
    return None


def _listing(fd: int) -> tuple[list[str], list[str]]:
    dirs: list[str] = []
    files: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(entry.name)
    except OSError:
        pass  # a directory that cannot be read lists nothing, as os.fwalk's does
    return dirs, files


@dataclass(slots=True)
class Walk:
    """One walk: its bounds, and what they left out."""

    max_depth: int = MAX_DEPTH
    max_entries: int = MAX_ENTRIES
    entries: int = 0
    too_deep: int = 0  # directories not entered: deeper than max_depth
    stopped: bool = False  # the entry bound ended the walk

    def run(self, ws: Workspace, rel: str) -> Iterator[tuple[str, list[str], list[str], int]]:
        """``(dir, dirs, files, dir_fd)`` of the judged directory ``rel`` and those under it,
        top-down in the order of ``dirs`` (prune or sort it in place); ``dir`` is
        workspace-relative, ``dir_fd`` valid until the next step. Links are listed among
        ``files``, never followed."""
        # The directories on the current path: (workspace-relative path, descriptor, the
        # subdirectories still to enter).
        stack: list[tuple[str, int, Iterator[str]]] = []
        current: tuple[str, int] | None = (rel, ws.open_dir(rel))
        try:
            while current is not None:
                here, fd = current
                dirs, files = _listing(fd)
                room = self.max_entries - self.entries
                if len(dirs) + len(files) > room:
                    self.stopped = True
                    files = files[: max(room, 0)]
                    dirs = dirs[: max(room - len(files), 0)]
                self.entries += len(dirs) + len(files)
                yield here, dirs, files, fd
                if self.stopped:
                    return
                if len(stack) >= self.max_depth:
                    self.too_deep += len(dirs)
                    dirs = []
                stack.append((here, fd, iter(list(dirs))))
                current = None  # the stack holds its descriptor now
                current = _next(stack)
        finally:
            if current is not None:
                os.close(current[1])
            for _, held, _ in stack:
                os.close(held)

    def observations(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "too_deep": self.too_deep,
            "stopped": self.stopped,
            "max_depth": self.max_depth,
            "max_entries": self.max_entries,
        }

    def note(self, tool: str) -> str | None:
        """What the result must say the walk left out, if anything."""
        said = []
        if self.too_deep:
            dirs = "1 directory" if self.too_deep == 1 else f"{self.too_deep:,} directories"
            said.append(f"{dirs} deeper than {self.max_depth} levels not entered")
        if self.stopped:
            said.append(f"the walk stopped after {self.max_entries:,} entries")
        if not said:
            return None
        return f"[{tool}: {'; '.join(said)}; search a narrower path for the rest]"
