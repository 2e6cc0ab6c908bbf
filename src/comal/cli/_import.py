"""``comal import``: transcripts from other agents into the ledger, one transaction per file.

A folder argument is walked for files (hidden files and folders are left out). A file found
that way which is not a transcript at all is skipped with a warning naming it and why, since a
folder such as ``~/.claude/projects`` also holds other files; a file named on the command line
must import. ``--strict`` makes a skipped file a failure too.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import ComalError, ImportFormatError

if TYPE_CHECKING:
    from ..importers import StoredSession
    from ..ledger import LedgerBackend
from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, err, ledger, out

# The importers' format names, spelled here so `comal --help` does not load every importer
# (tests/test_cli_import.py pins them equal to comal.importers.FORMATS).
FORMAT_NAMES = (
    "claude-code",
    "claude-code-web",
    "swe-agent",
    "mini-swe-agent",
    "codex",
    "openhands",
    "openhands-resolver",
    "openai",
    "anthropic",
    "locomo",
)

app = typer.Typer()


@dataclass
class Summary:
    files: int = 0  # files considered: named, or found in a folder
    imported: int = 0  # files read and stored (or found already stored)
    sessions: int = 0  # sessions this run created
    already_imported: int = 0  # sessions that were in the ledger before
    entries: int = 0  # entries this run wrote
    skipped: int = 0  # files found in a folder that are not transcripts
    failed: int = 0
    not_reached: int = 0  # files left when the import was interrupted (Ctrl-C)
    interrupted: bool = False

    def add(self, stored: list[StoredSession]) -> None:
        self.imported += 1
        for s in stored:
            if s.created:
                self.sessions += 1
                self.entries += s.entries
            else:
                self.already_imported += 1

    def line(self) -> str:
        files = "file" if self.files == 1 else "files"
        return (
            f"{self.files} {files}: {self.imported} imported ({self.sessions} new sessions, "
            f"{self.entries} entries; {self.already_imported} sessions already imported), "
            f"{self.skipped} skipped, {self.failed} failed"
            + (
                f"; interrupted: {self.not_reached} not imported (import again to go on: the "
                "files stored are found there, a file cut off stored nothing)"
                if self.interrupted
                else ""
            )
        )


def _walk(folder: Path) -> Iterable[Path]:
    """Every file under ``folder``, sorted, without hidden entries or symlinked folders."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(root) / name


def collect(paths: Iterable[Path]) -> tuple[list[tuple[Path, bool]], list[Path]]:
    """The files to import, each once, with whether it was found by walking a folder; and the
    folders that held no file."""
    seen: set[Path] = set()
    found: list[tuple[Path, bool]] = []
    empty: list[Path] = []
    for path in paths:
        walked = path.is_dir()
        files = list(_walk(path)) if walked else [path]
        if not files:
            empty.append(path)
        for file in files:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.append((file, walked))
    return found, empty


def not_a_transcript(path: Path, format: str) -> ImportFormatError | None:
    """Why a file found in a folder is not one to import, or None."""
    from ..importers import detect_format

    try:
        seen = detect_format(path)
    except ImportFormatError as exc:
        return exc
    if format != "auto" and seen != format:
        return ImportFormatError(
            f"the content looks like {seen!r}, not {format!r} (--format)", path=str(path)
        )
    return None


def _coded(exc: ComalError) -> str:
    return escape(f"[{exc.code}] {safe(str(exc))}")


def _report_skipped(path: Path, skip: ImportFormatError, as_json: bool) -> None:
    if as_json:
        emit_json({"path": str(path), "skipped": {"code": skip.code, "message": str(skip)}})
    else:
        err.print(
            f"[yellow]skipped[/] {_coded(skip)} (not a transcript; --strict makes this an error)",
            soft_wrap=True,
        )


def _import_file(
    led: LedgerBackend,
    path: Path,
    format: str,
    lenient: bool,
    tenant: str,
    agent: str | None,
    summary: Summary,
    as_json: bool,
) -> None:
    """One file into the ledger (one transaction), reported; a failure is counted, not raised."""
    from ..importers import load, store

    try:
        stored = store(led, load(path, format, lenient=lenient), tenant=tenant, agent=agent)
    except ComalError as exc:
        summary.failed += 1
        if as_json:
            emit_json({"path": str(path), "error": {"code": exc.code, "message": str(exc)}})
        else:
            err.print(f"[red]failed[/] {_coded(exc)}", soft_wrap=True)
        return
    summary.add(stored)
    for s in stored:
        if as_json:
            emit_json(s.as_dict())
        else:
            verb = "imported" if s.created else "already imported"
            shown = escape(safe(f"{s.path} → {s.session}"))
            out.print(
                f"{verb} {shown} ({s.format}: {s.entries} entries, {s.tool_calls} calls, "
                f"{s.tool_results} results, {s.usages} usages)",
                soft_wrap=True,
            )
        for w in s.warnings:
            err.print(f"[yellow]warning[/] {escape(safe(w))}", soft_wrap=True)


class _StopBetweenFiles:
    """Ctrl-C ends the import between two files, so what it says it stored is what is stored
    (a file is one transaction; stopped inside one, a print or the count could be cut in
    half). A second Ctrl-C stops at once: the file being read rolls back whole."""

    def __init__(self) -> None:
        self.asked = False
        self._previous: Any = None

    def __call__(self) -> bool:
        return self.asked

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def __enter__(self) -> _StopBetweenFiles:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


@app.command("import")
def import_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Transcript files, or folders to walk for them.", exists=True),
    ],
    format: Annotated[
        str, typer.Option("--format", "-f", help=f"auto or one of: {', '.join(FORMAT_NAMES)}")
    ] = "auto",
    lenient: Annotated[
        bool,
        typer.Option(
            "--lenient", help="Skip bad records with a warning and close dangling tool calls."
        ),
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="A file found in a folder that is not a transcript fails the import "
            "(default: skipped with a warning).",
        ),
    ] = False,
    tenant: Annotated[str, typer.Option(help="Tenant to import into.")] = "local",
    agent: Annotated[
        str | None, typer.Option(help="Agent name (default: the transcript's format).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import agent transcripts (Claude Code, Codex, SWE-agent, mini-swe-agent, OpenHands,
    OpenAI/Anthropic message lists), from files or every file under a folder. A file that
    fails imports nothing; exit 2 if any failed. --json prints one object per stored session
    (or per failed or skipped file), then {"summary": ...}. Interrupted (Ctrl-C), it says what
    it stored so far and exits 130; the file it was reading stored nothing.

    Example: comal import ~/.claude/projects --lenient
    """
    files, empty = collect(paths)
    summary = Summary(files=len(files))
    for folder in empty:
        err.print(f"[yellow]warning[/] {escape(safe(str(folder)))}: no files in it", soft_wrap=True)
    with (
        coded_errors(as_json),
        _StopBetweenFiles() as stop,
        ledger(create=True) as led,
        Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as progress,
    ):
        task = progress.add_task("importing", total=len(files))
        done = 0
        try:
            for path, walked in files:
                if stop():
                    break
                progress.update(task, description=f"importing {escape(safe(path.name))}")
                skip = not_a_transcript(path, format) if walked and not strict else None
                if skip is not None:
                    summary.skipped += 1
                    _report_skipped(path, skip, as_json)
                else:
                    _import_file(led, path, format, lenient, tenant, agent, summary, as_json)
                done += 1
                progress.advance(task)
        except KeyboardInterrupt:  # a second Ctrl-C: the file being read rolled back whole
            stop.asked = True
        summary.interrupted, summary.not_reached = stop.asked, len(files) - done
    if as_json:
        said = asdict(summary)
        if not summary.interrupted:  # the keys of an interrupted import only
            del said["interrupted"], said["not_reached"]
        emit_json({"summary": said})
    else:
        out.print(summary.line(), soft_wrap=True)
    if summary.interrupted:
        raise typer.Exit(130)
    if summary.failed:
        raise typer.Exit(2)
