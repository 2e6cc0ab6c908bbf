"""Native file tools: Read, Write, Edit, Glob and Grep, all confined to the workspace root.

Write and Edit are *planned*: they compute the bytes to write and return a
:class:`~comal.ops.PlannedWrite`; the house records the preparation, writes atomically and
reads the file back, so their receipts carry the path's digest before and after (OPS-5).
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..messages import sha256_hex
from ._errors import ToolFailure
from ._model import CallContext, Effect, PlannedWrite, ToolOutput
from ._operation import DEFAULT_CAP, LARGE_CAP, Handler, Operation, Planner

__all__ = ["EditArgs", "GlobArgs", "GrepArgs", "ReadArgs", "WriteArgs", "file_operations"]

_PATH = "File path, relative to the workspace root (or absolute inside it)."
# Grep skips files larger than this: a search is for text, not for disk images.
_GREP_MAX_BYTES = 10 * 1024 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReadArgs(_Args):
    path: str = Field(min_length=1, description=_PATH)
    offset: int = Field(1, ge=1, description="First line to show (1-based).")
    limit: int = Field(2000, ge=1, le=100_000, description="How many lines to show.")


class WriteArgs(_Args):
    path: str = Field(min_length=1, description=_PATH)
    content: str = Field(description="The whole new content of the file.")


class EditArgs(_Args):
    path: str = Field(min_length=1, description=_PATH)
    old_string: str = Field(min_length=1, description="Exact text to replace.")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence, not just one.")


class GlobArgs(_Args):
    pattern: str = Field(min_length=1, description="Glob pattern such as **/*.py.")
    path: str = Field(".", min_length=1, description="Directory to search from.")


class GrepArgs(_Args):
    pattern: str = Field(min_length=1, description="Python regular expression.")
    path: str = Field(".", min_length=1, description="File or directory to search.")
    glob: str | None = Field(None, description="Only files whose path matches this glob.")
    ignore_case: bool = Field(False, description="Case-insensitive matching.")
    output_mode: Literal["content", "files_with_matches", "count"] = Field(
        "files_with_matches", description="Matching lines, file names, or counts per file."
    )


def _existing_file(ctx: CallContext, raw: str) -> tuple[Path, str]:
    ws = ctx.need_workspace()
    path = ws.resolve(raw)
    rel = ws.rel(path)
    if not path.exists():
        raise ToolFailure(f"{rel} does not exist; check the path with Glob")
    if not path.is_file():
        raise ToolFailure(f"{rel} is not a regular file")
    return path, rel


def _read(args: ReadArgs, ctx: CallContext) -> ToolOutput:
    path, rel = _existing_file(ctx, args.path)
    data = path.read_bytes()
    digest = sha256_hex(data)
    seen = {"path": rel, "sha256": digest, "size": len(data)}
    if b"\x00" in data[:8192]:
        raise ToolFailure(
            f"{rel} is binary ({len(data):,} bytes, sha256 {digest}); Read shows text"
        )
    try:
        text = data.decode("utf-8")
        lossy = False
    except UnicodeDecodeError:
        text, lossy = data.decode("utf-8", "replace"), True
    lines = text.splitlines()
    seen |= {"lines": len(lines), "lossy": lossy}
    if not lines:
        return ToolOutput(f"[{rel} is empty]", observations=seen)
    if args.offset > len(lines):
        raise ToolFailure(f"{rel} has {len(lines)} lines; offset {args.offset} is past the end")
    start, end = args.offset - 1, min(len(lines), args.offset - 1 + args.limit)
    body = "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines[start:end], start + 1))
    if end < len(lines):
        body += (
            f'\n[{len(lines) - end} more lines; continue with Read(path="{rel}", offset={end + 1})]'
        )
    if lossy:
        body += "\n[the file is not valid UTF-8: undecodable bytes are shown as U+FFFD]"
    return ToolOutput(body, observations=seen)


def _plan_write(args: WriteArgs, ctx: CallContext) -> PlannedWrite:
    ws = ctx.need_workspace()
    path = ws.resolve(args.path)
    rel = ws.rel(path)
    if path.exists() and not path.is_file():
        raise ToolFailure(f"{rel} exists and is not a regular file")
    before = path.read_bytes() if path.exists() else None
    after = args.content.encode("utf-8", "surrogatepass")
    verb = "created" if before is None else "replaced"
    return PlannedWrite(path, rel, before, after, f"Wrote {len(after):,} bytes to {rel} ({verb})")


def _plan_edit(args: EditArgs, ctx: CallContext) -> PlannedWrite:
    path, rel = _existing_file(ctx, args.path)
    before = path.read_bytes()
    try:
        text = before.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Editing decoded-with-replacement text would silently rewrite the undecodable bytes.
        raise ToolFailure(
            f"{rel} is not valid UTF-8 ({exc.reason}); Edit cannot change it"
        ) from exc
    if args.old_string == args.new_string:
        raise ToolFailure("old_string and new_string are the same; there is nothing to change")
    count = text.count(args.old_string)
    if count == 0:
        raise ToolFailure(f"old_string was not found in {rel}; Read the file and copy it exactly")
    if count > 1 and not args.replace_all:
        raise ToolFailure(
            f"old_string occurs {count} times in {rel}; add surrounding context to make it "
            "unique, or set replace_all=true"
        )
    new = text.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
    done = count if args.replace_all else 1
    return PlannedWrite(
        path, rel, before, new.encode("utf-8"), f"Edited {rel}: {done} replacement(s)"
    )


def _glob(args: GlobArgs, ctx: CallContext) -> ToolOutput:
    ws = ctx.need_workspace()
    base = ws.resolve(args.path)
    if Path(args.pattern).is_absolute() or ".." in Path(args.pattern).parts:
        raise ToolFailure("the glob pattern must be relative and must not contain '..'")
    if not base.is_dir():
        raise ToolFailure(f"{ws.rel(base)} is not a directory")
    found = sorted(ws.rel(p) for p in base.glob(args.pattern) if p.is_file() and ws.contains(p))
    seen = {"path": ws.rel(base), "matches": len(found)}
    if not found:
        return ToolOutput(
            f"[no files match {args.pattern} under {ws.rel(base)}]", observations=seen
        )
    return ToolOutput("\n".join(found), observations=seen)


def _files_under(base: Path, ctx: CallContext) -> list[Path]:
    if base.is_file():
        return [base]
    out: list[Path] = []
    # Hidden directories (.git, .venv, caches) are skipped: they are rarely what is searched.
    for root, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(Path(root) / f for f in sorted(files))
    return out


def _grep(args: GrepArgs, ctx: CallContext) -> ToolOutput:
    ws = ctx.need_workspace()
    base = ws.resolve(args.path)
    try:
        pattern = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolFailure(f"bad regular expression {args.pattern!r}: {exc}") from exc
    lines_out: list[str] = []
    skipped = 0
    files = 0
    for path in _files_under(base, ctx):
        rel = ws.rel(path.resolve()) if ws.contains(path) else None
        if rel is None or (
            args.glob
            and not fnmatch.fnmatchcase(rel, args.glob)
            and not fnmatch.fnmatchcase(path.name, args.glob)
        ):
            continue
        try:
            if path.stat().st_size > _GREP_MAX_BYTES:
                skipped += 1
                continue
            data = path.read_bytes()
        except OSError:
            skipped += 1
            continue
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        hits = [(n, line) for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]
        if not hits:
            continue
        files += 1
        if args.output_mode == "files_with_matches":
            lines_out.append(rel)
        elif args.output_mode == "count":
            lines_out.append(f"{rel}:{len(hits)}")
        else:
            lines_out.extend(f"{rel}:{n}:{line}" for n, line in hits)
    seen = {"path": ws.rel(base), "files": files, "skipped": skipped}
    if not lines_out:
        return ToolOutput(f"[no matches for {args.pattern!r}]", observations=seen)
    return ToolOutput("\n".join(lines_out), observations=seen)


def _path_of(args: ReadArgs | WriteArgs | EditArgs | GlobArgs | GrepArgs) -> str:
    return args.path


def _paths_of(args: ReadArgs | WriteArgs | EditArgs | GlobArgs | GrepArgs) -> list[str]:
    return [args.path]


def _file_op(
    name: str,
    description: str,
    model: type[BaseModel],
    effect: Effect,
    *,
    handler: Handler | None = None,
    plan: Planner | None = None,
    cap: int = DEFAULT_CAP,
) -> Operation:
    return Operation(
        name,
        description,
        model,
        handler,
        plan,
        effects=(effect,),
        subject=_path_of,
        subject_kind="path",
        paths=_paths_of,
        inline_cap=cap,
    )


def file_operations() -> list[Operation]:
    read, write = Effect("read"), Effect("write")
    return [
        _file_op(
            "Read",
            "Read a text file with line numbers (like cat -n); offset/limit select lines.",
            ReadArgs,
            read,
            handler=_read,
            cap=LARGE_CAP,
        ),
        _file_op(
            "Write",
            "Create or replace a file with the given content.",
            WriteArgs,
            write,
            plan=_plan_write,
        ),
        _file_op(
            "Edit",
            "Replace an exact, unique string in a file (replace_all for every occurrence).",
            EditArgs,
            write,
            plan=_plan_edit,
        ),
        _file_op(
            "Glob",
            "List files matching a glob pattern, sorted by path.",
            GlobArgs,
            read,
            handler=_glob,
        ),
        _file_op(
            "Grep",
            "Search file contents with a Python regular expression.",
            GrepArgs,
            read,
            handler=_grep,
        ),
    ]
