"""Native file tools: Read, Write, Edit, Glob and Grep, all confined to the workspace root.

Every tool opens exactly the path the judge resolved, through the workspace's descriptors
(:class:`~comal.ops.Workspace`): no symlink is followed at execution, only regular files are
read (a FIFO, device or socket is refused, never opened for a blocking read), and every OS error
becomes a coded failure. Symlinks inside the workspace that point inside it are followed at
judgment; Glob and Grep list and search what they walk without following any link.

Reads stream: a file up to 16 MiB is read whole (exact digest and line count); a larger one is
read line by line from ``offset`` until ``limit`` lines (each cut at 64 KiB) or 4 MiB of text,
so ``Read(limit=1)`` of a sparse 10 GB file reads a few bytes, within the call's time limit.
Glob and Grep live in :mod:`._files_search`.

Write and Edit are *planned*: they compute the bytes to write and return a
:class:`~comal.ops.PlannedWrite`; the house records the preparation, writes atomically and
reads the file back, so their receipts carry the path's digest before and after (OPS-5).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import IO

from pydantic import BaseModel, Field

from ..messages import sha256_hex
from ._errors import NotRegularFile, ToolFailure
from ._files_common import PATH_HELP, SNIFF, Clock, StrictArgs
from ._files_search import GlobArgs, GrepArgs, glob_files, grep_files
from ._model import CallContext, Effect, PlannedWrite, ToolOutput
from ._operation import DEFAULT_CAP, LARGE_CAP, Handler, Operation, Planner

__all__ = [
    "EditArgs",
    "GlobArgs",
    "GrepArgs",
    "ReadArgs",
    "WriteArgs",
    "file_operations",
    "planned_bytes",
]

# Read takes files up to this size whole; larger ones are streamed line by line.
_WHOLE = 16 * 1024 * 1024
_LINE_CAP = 64 * 1024
_READ_BUDGET = 4 * 1024 * 1024
_CHUNK_IO = 1 << 16


class ReadArgs(StrictArgs):
    path: str = Field(min_length=1, description=PATH_HELP)
    offset: int = Field(1, ge=1, description="First line to show (1-based).")
    limit: int = Field(2000, ge=1, le=100_000, description="How many lines to show.")


class WriteArgs(StrictArgs):
    path: str = Field(min_length=1, description=PATH_HELP)
    content: str = Field(description="The whole new content of the file.")


class EditArgs(StrictArgs):
    path: str = Field(min_length=1, description=PATH_HELP)
    old_string: str = Field(min_length=1, description="Exact text to replace.")
    new_string: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence, not just one.")


def _lines(first: bytes, fh: IO[bytes], clock: Clock) -> Iterator[tuple[bytes, int]]:
    """Lines (without their newline) of ``first`` then ``fh``, each cut at ``_LINE_CAP``
    bytes; the int is how many bytes of the line were cut off. Memory stays bounded."""
    buf = first
    eof = False
    count = 0
    while True:
        at = buf.find(b"\n")
        while at < 0 and len(buf) <= _LINE_CAP and not eof:
            more = fh.read(_LINE_CAP)
            if more:
                buf += more
                at = buf.find(b"\n")
            else:
                eof = True
        if 0 <= at <= _LINE_CAP:
            yield buf[:at], 0
            buf = buf[at + 1 :]
        elif at < 0 and len(buf) <= _LINE_CAP:  # the end, maybe a last line with no newline
            if buf:
                yield buf, 0
            return
        else:  # a line longer than the cap: keep its start, count and skip the rest
            line, rest, cut = buf[:_LINE_CAP], buf[_LINE_CAP:], 0
            while True:
                at = rest.find(b"\n")
                if at >= 0:
                    cut += at
                    buf = rest[at + 1 :]
                    break
                cut += len(rest)
                clock.check("Read")
                rest = fh.read(1 << 20)
                if not rest:
                    buf, eof = b"", True
                    break
            yield line, cut
            if eof:
                return
        count += 1
        if count % 4096 == 0:
            clock.check("Read")


def _binary(rel: str, size: int, digest: str | None) -> ToolFailure:
    what = f"sha256 {digest}" if digest else "too large to hash here"
    return ToolFailure(f"{rel} is binary ({size:,} bytes, {what}); Read shows text")


def _read(args: ReadArgs, ctx: CallContext) -> ToolOutput:
    ws = ctx.need_workspace()
    rel = ctx.path(args.path)
    fd, st = ws.open_file(rel)
    clock = Clock(ctx)
    with os.fdopen(fd, "rb", buffering=_CHUNK_IO) as fh:
        first = fh.read(SNIFF)
        if st.st_size <= _WHOLE:
            rest = fh.read(_WHOLE + 1 - len(first))
            if len(first) + len(rest) <= _WHOLE:
                return _read_whole(args, rel, first + rest)
            first += rest
        if b"\x00" in first[:SNIFF]:
            raise _binary(rel, st.st_size, None)
        return _read_stream(args, rel, st.st_size, first, fh, clock)


def _read_whole(args: ReadArgs, rel: str, data: bytes) -> ToolOutput:
    digest = sha256_hex(data)
    seen: dict[str, object] = {"path": rel, "sha256": digest, "size": len(data)}
    if b"\x00" in data[:SNIFF]:
        raise _binary(rel, len(data), digest)
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


def _read_stream(
    args: ReadArgs, rel: str, size: int, first: bytes, fh: IO[bytes], clock: Clock
) -> ToolOutput:
    shown: list[str] = []
    budget = _READ_BUDGET
    lossy = False
    number = 0
    more = False
    cut_lines = 0
    for raw, cut in _lines(first, fh, clock):
        number += 1
        if number < args.offset:
            continue
        if len(shown) >= args.limit or budget <= 0:
            more = True
            number -= 1
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line, lossy = raw.decode("utf-8", "replace"), True
        if cut:
            cut_lines += 1
            line += f" [... {cut:,} more bytes of this line not shown]"
        budget -= len(raw)
        shown.append(f"{number:6d}\t{line}")
    seen: dict[str, object] = {
        "path": rel,
        "size": size,
        "sha256": None,
        "streamed": True,
        "lines_read": number,
        "lossy": lossy,
    }
    if not shown:
        if number == 0:
            return ToolOutput(f"[{rel} is empty]", observations=seen)
        raise ToolFailure(f"{rel} has {number} lines; offset {args.offset} is past the end")
    body = "\n".join(shown)
    last = args.offset + len(shown) - 1
    if more:
        body += (
            f"\n[{rel} is {size:,} bytes, read as a stream; more lines follow: continue with "
            f'Read(path="{rel}", offset={last + 1})]'
        )
    if cut_lines:
        body += f"\n[{cut_lines} line(s) longer than {_LINE_CAP:,} bytes were cut]"
    if lossy:
        body += "\n[the file is not valid UTF-8: undecodable bytes are shown as U+FFFD]"
    return ToolOutput(body, observations=seen)


def _existing_bytes(ctx: CallContext, raw: str) -> tuple[str, bytes | None]:
    ws = ctx.need_workspace()
    rel = ctx.path(raw)
    if rel == ".":
        raise NotRegularFile(". is the workspace root, a directory")
    return rel, ws.read_bytes(rel)


def planned_bytes(args: WriteArgs | EditArgs, rel: str, before: bytes | None) -> tuple[bytes, str]:
    """The bytes a Write or Edit leaves at ``rel`` when the file now holds ``before`` (``None``:
    absent), and the call's summary; :class:`ToolFailure` when the call would fail. The
    planners and an approval's diff (:mod:`._preview`) both read the change from here."""
    if isinstance(args, WriteArgs):
        after = args.content.encode("utf-8", "surrogatepass")
        verb = "created" if before is None else "replaced"
        return after, f"Wrote {len(after):,} bytes to {rel} ({verb})"
    if before is None:
        raise ToolFailure(f"{rel} does not exist; check the path with Glob")
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
    return new.encode("utf-8"), f"Edited {rel}: {done} replacement(s)"


def _plan(args: WriteArgs | EditArgs, ctx: CallContext) -> PlannedWrite:
    rel, before = _existing_bytes(ctx, args.path)
    after, summary = planned_bytes(args, rel, before)
    return PlannedWrite(ctx.need_workspace().root / rel, rel, before, after, summary)


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
            plan=_plan,
        ),
        _file_op(
            "Edit",
            "Replace an exact, unique string in a file (replace_all for every occurrence).",
            EditArgs,
            write,
            plan=_plan,
        ),
        _file_op(
            "Glob",
            "List files matching a glob pattern, sorted by path.",
            GlobArgs,
            read,
            handler=glob_files,
        ),
        _file_op(
            "Grep",
            "Search file contents with a regular expression (RE2 syntax: no backreferences or "
            "lookaround).",
            GrepArgs,
            read,
            handler=grep_files,
        ),
    ]
