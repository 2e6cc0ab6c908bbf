"""The ``comal`` command line: one Typer app, one module per group of commands."""

from __future__ import annotations

import sys
from typing import Annotated, Any

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


def _flags_take_no_value(command: Any) -> Any:
    """``--json``, not ``--json <bool>``: a flag's help shows no value to give it."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _flags_take_no_value(sub)
    return command


def hoist_ledger(args: list[str]) -> list[str]:
    """``--ledger X`` given after the command works as before it: the one option every
    command shares is accepted in the same places on every command."""
    rest, front, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--ledger" and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        if arg.startswith("--ledger="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def main(argv: list[str] | None = None) -> None:
    """``comal``: the agent (``-p``, ``--resume``, or the TUI) or one of the commands."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["agent"]:
        target, name, rest = agent_app, "comal agent", normalize_argv(args[1:])
    elif is_agent_invocation(args):
        target, name, rest = agent_app, "comal", normalize_argv(args)
    else:
        target, name, rest = app, "comal", hoist_ledger(args)
    _flags_take_no_value(typer.main.get_command(target)).main(rest, prog_name=name)


__all__ = ["app", "main"]
