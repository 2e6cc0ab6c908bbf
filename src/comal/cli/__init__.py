"""The ``comal`` command line: one Typer app, one module per group of commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import __version__
from . import _bench, _context, _engine, _import, _ops, _sessions
from ._common import STATE

app = typer.Typer(
    name="comal",
    help="comal: a lossless ledger and token-budgeted context engine for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"comal {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger",
            envvar="COMAL_LEDGER",
            help="Ledger database (default: ledger.db in the per-user data directory).",
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE.ledger_path = ledger


for sub in (_import.app, _sessions.app, _context.app, _engine.app, _ops.app):
    for command in sub.registered_commands:
        app.registered_commands.append(command)
app.add_typer(_bench.app, name="bench")


def main() -> None:
    app()


__all__ = ["app", "main"]
