"""The agent entry point: ``comal -p PROMPT``, ``comal --resume UUID [-p]``, and the TUI.

``-p`` is print (headless) mode, as in other agent CLIs; it takes the prompt as its value, and
``comal --resume UUID -p`` (no value) continues a session headless without a new prompt. Without
``-p`` the interactive TUI opens. Commands (``comal import ...``) are dispatched by the main app.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ._common import LEDGER_HELP, STATE

agent_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

_BARE_P = "\x00"  # stands for "-p given without a prompt" after argv normalization


def normalize_argv(args: list[str]) -> list[str]:
    """Give a bare ``-p``/``--print`` an explicit empty value so the parser accepts it."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        bare = i + 1 == len(args) or (args[i + 1].startswith("-") and args[i + 1] != "-")
        if arg in ("-p", "--print") and bare:
            out.append(_BARE_P)
    return out


# The agent command's options (a test keeps this equal to them): one of them first on the
# line runs the agent, so ``comal --model M`` opens the TUI with that model.
AGENT_OPTIONS = frozenset(
    {
        "--allow",
        "--context-window",
        "--continue",
        "--deny",
        "--effort",
        "--engine",
        "--json",
        "--ledger",
        "--max-turns",
        "--mode",
        "--model",
        "--print",
        "--resume",
        "--system",
        "--workspace",
        "-c",
        "-p",
    }
)


def is_agent_invocation(args: list[str]) -> bool:
    """``-p``/``--print``/``--resume`` run the agent; so does nothing at all (the TUI), or an
    agent option before any command (``comal --model M``). Everything else (a command,
    ``--help``, ``--version``) goes to the command app."""
    agent_flags = ("-p", "--print", "--resume", "-c", "--continue")
    if any(a in agent_flags or a.startswith("--resume=") for a in args):
        return True
    rest = list(args)
    if rest[:1] == ["--ledger"]:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("--ledger="):
        rest = rest[1:]
    return not rest or rest[0].split("=", 1)[0] in AGENT_OPTIONS - {"--ledger", "--json"}


@agent_app.command()
def agent(
    prompt: Annotated[
        str | None,
        typer.Option(
            "-p", "--print", help="Headless: run PROMPT (- reads it from stdin), print the answer."
        ),
    ] = None,
    resume: Annotated[str | None, typer.Option(help="Continue the session UUID.")] = None,
    continue_latest: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the latest session.")
    ] = False,
    model: Annotated[
        str,
        typer.Option(
            envvar="COMAL_MODEL",
            help="provider:model (anthropic:…, openai:…, openai-responses:…, "
            "openai-compat:URL#model) or script:PATH.",
        ),
    ] = "",
    context_window: Annotated[
        int | None, typer.Option(help="Cap the window (minimum with the model's).", min=1)
    ] = None,
    engine: Annotated[
        str, typer.Option(help="Context engine (limit, ...); default: the configuration's.")
    ] = "",
    mode: Annotated[str, typer.Option(help="read-only | ask | trusted")] = "",
    effort: Annotated[str, typer.Option(help="Reasoning effort (low, medium, high).")] = "",
    system: Annotated[
        str | None, typer.Option(help="System prompt (replaces the configured one).")
    ] = None,
    allow: Annotated[list[str] | None, typer.Option(help="Allow rule, e.g. 'Bash(git *)'.")] = None,
    deny: Annotated[
        list[str] | None, typer.Option(help="Deny rule, e.g. 'Write(secrets/**)'.")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="Files the tools may touch (default: the session's, or the current)."),
    ] = None,
    max_turns: Annotated[
        int, typer.Option(help="Model calls per run (0: as configured, 50 by default).", min=0)
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False,
    ledger: Annotated[
        str | None,
        typer.Option("--ledger", envvar="COMAL_LEDGER", help=f"{LEDGER_HELP}."),
    ] = None,
) -> None:
    """Run the agent: headless with -p, or the interactive TUI without it.

    Example: comal -p "fix the failing test" --model anthropic:claude-sonnet-4-6 --mode ask
    """
    from ..agent import Flags

    STATE.ledger_path = ledger
    flags = Flags(
        model=model or None,
        context_window=context_window,
        engine=engine or None,
        mode=mode or None,
        effort=effort or None,
        allow=tuple(allow or ()),
        deny=tuple(deny or ()),
        workspace=workspace,
        system=system,
        max_turns=max_turns or None,
    )
    if prompt is None:
        from ._tui import run_tui

        raise typer.Exit(run_tui(flags, resume=resume, latest=continue_latest))
    from ._agent import run_prompt

    if prompt == "-":
        prompt = sys.stdin.read()
    code = run_prompt(
        None if prompt == _BARE_P else prompt,
        flags,
        resume=resume,
        latest=continue_latest,
        as_json=as_json,
    )
    raise typer.Exit(code)
