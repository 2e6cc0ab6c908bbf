"""``comal import``: transcripts from other agents into the ledger, one transaction per file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import ComalError
from ..importers import FORMATS, load, store
from ._common import JsonOpt, emit_json, err, ledger, out

app = typer.Typer()


@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Transcript files.", exists=True)],
    format: Annotated[
        str, typer.Option("--format", "-f", help=f"auto or one of: {', '.join(FORMATS)}")
    ] = "auto",
    lenient: Annotated[
        bool,
        typer.Option(help="Skip bad records with a warning and close dangling tool calls."),
    ] = False,
    tenant: Annotated[str, typer.Option(help="Tenant to import into.")] = "local",
    agent: Annotated[
        str | None, typer.Option(help="Agent name (default: the transcript's format).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Import agent transcripts (Claude Code, Codex, SWE-agent, mini-swe-agent, OpenHands,
    OpenAI/Anthropic message lists). A file that fails imports nothing; exit 2 if any failed.

    Example: comal import ~/.claude/projects/x/*.jsonl --lenient
    """
    failed = 0
    with (
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
        task = progress.add_task("importing", total=len(paths))
        for path in paths:
            progress.update(task, description=f"importing {path.name}")
            try:
                stored = store(led, load(path, format, lenient=lenient), tenant=tenant, agent=agent)
            except ComalError as exc:
                failed += 1
                if as_json:
                    emit_json({"path": str(path), "error": {"code": exc.code, "message": str(exc)}})
                else:
                    err.print(f"[red]failed[/] {exc}")
                progress.advance(task)
                continue
            for s in stored:
                if as_json:
                    emit_json(s.as_dict())
                else:
                    verb = "imported" if s.created else "already imported"
                    out.print(
                        f"{verb} {s.path} → {s.session} ({s.format}: {s.entries} entries, "
                        f"{s.tool_calls} calls, {s.tool_results} results, {s.usages} usages)"
                    )
                for w in s.warnings:
                    err.print(f"[yellow]warning[/] {w}")
            progress.advance(task)
    if failed:
        raise typer.Exit(2)
