"""The ``comal`` command line: one Typer app, one module per group of commands."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import __version__
from . import (
    _bench,
    _config,
    _context,
    _doctor,
    _engine,
    _import,
    _ops,
    _serve,
    _sessions,
    _summaries,
)
from ._common import STATE, LedgerOpt
from ._root import agent_app, is_agent_invocation, normalize_argv

app = typer.Typer(
    name="comal",
    help=(
        "comal: a lossless ledger and token-budgeted context engine for LLM agents.\n\n"
        "Run the agent with `comal -p PROMPT --model provider:model` (headless), continue one "
        "with `comal --resume UUID [-p]`, or open the TUI with `comal`; `comal agent --help` "
        "lists the agent's options. The commands below work on the ledger."
    ),
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
    ledger: LedgerOpt = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE.ledger_path = ledger


for sub in (
    _import.app,
    _sessions.app,
    _context.app,
    _engine.app,
    _ops.app,
    _doctor.app,
    _serve.app,
    _summaries.app,
):
    for command in sub.registered_commands:
        app.registered_commands.append(command)
app.add_typer(_bench.app, name="bench")
app.add_typer(_config.app, name="config")
app.add_typer(_serve.keys_app, name="keys")


def main(argv: list[str] | None = None) -> None:
    """``comal``: the agent (``-p``, ``--resume``, or the TUI) or one of the commands."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["agent"]:
        agent_app(normalize_argv(args[1:]), prog_name="comal agent")
    elif is_agent_invocation(args):
        agent_app(normalize_argv(args), prog_name="comal")
    else:
        app(args, prog_name="comal")


__all__ = ["app", "main"]
