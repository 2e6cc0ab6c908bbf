"""The ``comal`` command line: one Typer app, one module per group of commands.

Only the module of the command being run is imported (``comal sessions`` loads ``_sessions``,
``comal -p`` none of them): :data:`COMMAND_MODULES` says where each command lives, and a test
checks it against the modules. ``comal --help``, an unknown command and :data:`app` (what tests
and embedders invoke) load every module.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Annotated, Any

import typer

from .. import __version__
from .._syspath import forget_current_folder
from ._common import STATE, LedgerOpt, coded_errors
from ._root import agent_app, is_agent_invocation, normalize_argv

# The modules of the flat commands, in the order ``comal --help`` lists them.
_FLAT = (
    "_import",
    "_sessions",
    "_export",
    "_context",
    "_replay",
    "_engine",
    "_ops",
    "_doctor",
    "_plugins",
    "_serve",
    "_summaries",
)
# The command groups: name -> (module, attribute).
_GROUPS = {
    "bench": ("_bench", "app"),
    "config": ("_config", "app"),
    "keys": ("_serve", "keys_app"),
    "memory": ("_memory", "app"),
}
COMMAND_MODULES = {
    "import": "_import",
    **dict.fromkeys(
        ("sessions", "show", "search", "events", "rename", "rm", "verify"), "_sessions"
    ),
    "export": "_export",
    "context": "_context",
    "replay": "_replay",
    **dict.fromkeys(("state", "compact", "evidence"), "_engine"),
    **dict.fromkeys(("tools", "call", "receipts", "reconcile"), "_ops"),
    "doctor": "_doctor",
    "plugins": "_plugins",
    "serve": "_serve",
    "summaries": "_summaries",
    **{group: module for group, (module, _) in _GROUPS.items()},
}
_HELP = (
    "comal: a lossless ledger and token-budgeted context engine for LLM agents.\n\n"
    "Run the agent with `comal -p PROMPT --model provider:model` (headless), continue one "
    "with `comal --resume UUID [-p]`, or open the TUI with `comal`; `comal agent --help` "
    "lists the agent's options. The commands below work on the ledger."
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"comal {__version__}")
        raise typer.Exit()


def _root(
    ledger: LedgerOpt = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE.ledger_path = ledger


def _coded(callback: Callable[..., Any]) -> Callable[..., Any]:
    """``callback`` with every coded error it lets through said as one (exit 2, ``--json``
    kept): a command's own ``coded_errors`` block covers its ledger work, and this covers the
    rest (``export`` converted after its block, and a format error went out as a traceback)."""
    if getattr(callback, "_coded", False):
        return callback

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        with coded_errors(bool(kwargs.get("as_json"))):
            return callback(*args, **kwargs)

    run._coded = True  # type: ignore[attr-defined]
    return run


def _guard(typer_app: typer.Typer) -> typer.Typer:
    for info in typer_app.registered_commands:
        if info.callback is not None:
            info.callback = _coded(info.callback)
    return typer_app


def build_app(modules: Iterable[str] | None = None) -> typer.Typer:
    """The ``comal`` app with the commands of ``modules`` (all of them when ``None``)."""
    wanted = set(_FLAT) | {m for m, _ in _GROUPS.values()} if modules is None else set(modules)
    root = typer.Typer(
        name="comal",
        help=_HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)
    for name in _FLAT:
        if name in wanted:
            module = importlib.import_module(f".{name}", __name__)
            root.registered_commands.extend(_guard(module.app).registered_commands)
    for group, (name, attr) in _GROUPS.items():
        if name in wanted:
            module = importlib.import_module(f".{name}", __name__)
            root.add_typer(_guard(getattr(module, attr)), name=group)
    return root


def _command_of(args: list[str]) -> str | None:
    """The command word of ``args`` (after :func:`hoist_ledger`: ``--ledger X`` leads)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--ledger":
            i += 2
            continue
        if arg.startswith("--ledger="):
            i += 1
            continue
        if arg.startswith("-"):
            return None  # --help, --version or a mistake: the whole app answers
        return arg
    return None


def __getattr__(name: str) -> Any:
    if name == "app":  # every command, built once on first use
        full = build_app()
        globals()["app"] = full
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tidy_help(command: Any) -> Any:
    """Help as a person reads it, for ``command`` and every command under it: ``--json``, not
    ``--json <bool>`` (a flag, ``--help`` too, shows no value to give it); and a docstring's
    paragraphs flowed to the terminal's width. Typer's rich help keeps each line break of a
    docstring, so a sentence broke wherever the source wrapped it."""
    import click

    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False):
            param.metavar = ""
        if isinstance(getattr(param, "help", None), str):
            param.help = _flowed(param.help)
    helper = command.get_help_option(click.Context(command))
    if helper is not None:
        helper.metavar = ""
    if isinstance(getattr(command, "help", None), str):
        command.help = _flowed(command.help)
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)
    return command


def _flowed(text: str) -> str:
    """Each paragraph of ``text`` on one line (paragraphs apart; click's ``\\b`` blocks kept)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


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


def _named_config_exists(args: list[str], command: str | None) -> None:
    """A missing file that ``COMAL_CONFIG`` names stops every command before it runs (CFG-1):
    ``doctor`` reports it as a failed check instead, ``--help`` needs no configuration, and a
    ``--config`` flag names the file in its place."""
    if command == "doctor" or any(a in ("--help", "--config") for a in args):
        return
    from .._config_file import named_config
    from ._common import coded_errors

    try:
        with coded_errors("--json" in args):
            named_config()
    except typer.Exit as exc:  # outside a command: no click context turns it into an exit
        raise SystemExit(exc.exit_code) from None


def main(argv: list[str] | None = None) -> None:
    """``comal``: the agent (``-p``, ``--resume``, or the TUI) or one of the commands."""
    # The console script's PYTHONPATH may hold the current folder (an empty entry): whatever
    # a command imports from here on is found where it was installed (comal._syspath).
    forget_current_folder()
    args = sys.argv[1:] if argv is None else argv
    for stream in (sys.stdout, sys.stderr):
        # A character the terminal's encoding cannot hold (a damaged byte read from a ledger)
        # is written as an escape, never a UnicodeEncodeError traceback.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    if args[:1] != ["--version"]:
        _named_config_exists(args, _command_of(hoist_ledger(args)))
    if args[:1] == ["agent"]:
        target, name, rest = _guard(agent_app), "comal agent", normalize_argv(args[1:])
    elif is_agent_invocation(args):
        target, name, rest = _guard(agent_app), "comal", normalize_argv(args)
    else:
        rest = hoist_ledger(args)
        module = COMMAND_MODULES.get(_command_of(rest) or "")
        target, name = build_app(None if module is None else [module]), "comal"
    _tidy_help(typer.main.get_command(target)).main(rest, prog_name=name)


__all__ = ["COMMAND_MODULES", "app", "build_app", "main"]
