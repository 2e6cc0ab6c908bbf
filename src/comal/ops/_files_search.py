"""Glob and Grep: list and search what they walk under the workspace root, following no link.

Grep searches files up to 10 MiB, runs the pattern on RE2 (linear time, :mod:`._regex`), and
stops at 4 MiB of output with a note; both honour the call's time limit. Both walk without
recursion within a depth and an entry bound (:mod:`._walk`), and say in the result what a bound
left out; a glob is matched without recursion too, however deep the path.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import Field

from ._errors import ToolFailure
from ._files_common import SNIFF, Clock, StrictArgs, path_kind
from ._model import CallContext, ToolOutput
from ._regex import MAX_PATTERN, compile_pattern
from ._walk import Walk
from ._workspace import Workspace

__all__ = ["GlobArgs", "GrepArgs", "glob_files", "grep_files"]

# Grep skips files larger than this: a search is for text, not for disk images.
_GREP_MAX_BYTES = 10 * 1024 * 1024
_GREP_OUTPUT = 4 * 1024 * 1024


class GlobArgs(StrictArgs):
    pattern: str = Field(min_length=1, description="Glob pattern such as **/*.py.")
    path: str = Field(".", min_length=1, description="Directory to search from.")


class GrepArgs(StrictArgs):
    pattern: str = Field(
        min_length=1,
        max_length=MAX_PATTERN,
        description="Regular expression (RE2 syntax: like Python's, without backreferences "
        "or lookaround).",
    )
    path: str = Field(".", min_length=1, description="File or directory to search.")
    glob: str | None = Field(None, description="Only files whose path matches this glob.")
    ignore_case: bool = Field(False, description="Case-insensitive matching.")
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        "files_with_matches", description="Matching lines, file names, or counts per file."
    )


def _glob_parts(pattern: str) -> list[str]:
    out: list[str] = []
    for part in pattern.split("/"):
        if part in ("", "."):
            continue
        if part == "**" and out and out[-1] == "**":
            continue
        out.append(part)
    return out


def _glob_match(pattern: list[str], parts: list[str]) -> bool:
    """pathlib's meaning: ``**`` is any number of directories, other segments one name.

    ``rest[j]``: whether the pattern's segments from the current one on match ``parts[j:]``,
    computed from the last segment back (a table, not recursion: paths can be deep)."""
    n = len(parts)
    rest = [j == n for j in range(n + 1)]
    for segment in reversed(pattern):
        now = [False] * (n + 1)
        for j in range(n, -1, -1):
            if segment == "**":
                now[j] = rest[j] or (j < n and now[j + 1])
            else:
                now[j] = j < n and rest[j + 1] and fnmatch.fnmatchcase(parts[j], segment)
        rest = now
    return rest[0]


def glob_files(args: GlobArgs, ctx: CallContext) -> ToolOutput:
    ws = ctx.need_workspace()
    base = ctx.path(args.path)
    if Path(args.pattern).is_absolute() or ".." in Path(args.pattern).parts:
        raise ToolFailure("the glob pattern must be relative and must not contain '..'")
    if path_kind(ws, base) != "dir":
        raise ToolFailure(f"{base} is not a directory")
    pattern = _glob_parts(args.pattern)
    clock = Clock(ctx)
    found: list[str] = []
    prefix = "" if base == "." else base + "/"
    walk = Walk()
    for top, dirs, files, dfd in walk.run(ws, base):
        clock.check("Glob")
        dirs.sort()
        under = top[len(prefix) :] if top != base else ""
        for name in files:
            parts = [*(under.split("/") if under else ()), name]
            if _glob_match(pattern, parts) and ws.is_regular(dfd, name):
                found.append(f"{prefix}{'/'.join(parts)}")
    found.sort()
    seen = {"path": base, "matches": len(found), "walk": walk.observations()}
    note = walk.note("Glob")
    if not found:
        found = [f"[no files match {args.pattern} under {base}]"]
    return ToolOutput("\n".join([*found, *([note] if note else [])]), observations=seen)


def _grep_targets(
    ws: Workspace, base: str, walk: Walk
) -> Iterator[tuple[str, int | None, os.stat_result | None]]:
    """``(rel, fd, stat)`` of every regular file to search; ``fd`` is ``None`` for an entry
    that is skipped (a link, FIFO, device or socket)."""
    if path_kind(ws, base) == "file":
        fd, st = ws.open_file(base)
        yield base, fd, st
        return
    # Hidden directories (.git, .venv, caches) are skipped: they are rarely what is searched.
    for top, dirs, files, dfd in walk.run(ws, base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            rel = name if top == "." else f"{top}/{name}"
            entry = ws.open_entry(dfd, name, rel)
            yield (rel, *entry) if entry is not None else (rel, None, None)


def grep_files(args: GrepArgs, ctx: CallContext) -> ToolOutput:
    ws = ctx.need_workspace()
    base = ctx.path(args.path)
    pattern = compile_pattern(args.pattern, ignore_case=args.ignore_case)
    clock = Clock(ctx)
    lines_out: list[str] = []
    size = 0
    skipped = 0
    files = 0
    capped = False
    walk = Walk()
    for rel, fd, st in _grep_targets(ws, base, walk):
        if fd is None or st is None:
            skipped += 1
            continue
        with os.fdopen(fd, "rb") as fh:
            clock.check("Grep")
            if args.glob and not (
                fnmatch.fnmatchcase(rel, args.glob)
                or fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], args.glob)
            ):
                continue
            if st.st_size > _GREP_MAX_BYTES:
                skipped += 1
                continue
            data = fh.read(_GREP_MAX_BYTES + 1)
        if len(data) > _GREP_MAX_BYTES:
            skipped += 1
            continue
        if b"\x00" in data[:SNIFF]:
            continue
        hits: list[tuple[int, str]] = []
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if n % 4096 == 0:
                clock.check("Grep")
            if pattern.search(line):
                hits.append((n, line))
        if not hits:
            continue
        files += 1
        if args.output_mode == "files_with_matches":
            new = [rel]
        elif args.output_mode == "count":
            new = [f"{rel}:{len(hits)}"]
        else:
            new = [f"{rel}:{n}:{line}" for n, line in hits]
        for line in new:
            size += len(line) + 1
            if size > _GREP_OUTPUT:
                capped = True
                break
            lines_out.append(line)
        if capped:
            break
    seen = {"path": base, "files": files, "skipped": skipped, "capped": capped}
    seen["walk"] = walk.observations()
    note = walk.note("Grep")
    if not lines_out:
        text = f"[no matches for {args.pattern!r}]"
    else:
        text = "\n".join(lines_out)
    if capped:
        text += (
            f"\n[Grep stopped at its output cap of {_GREP_OUTPUT:,} characters after "
            f"{len(lines_out):,} lines; narrow the pattern, the path or the glob]"
        )
    if note:
        text += f"\n{note}"
    return ToolOutput(text, observations=seen)
