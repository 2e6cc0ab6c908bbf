"""The agent entry point: ``comal -p PROMPT``, ``comal --resume UUID [-p]``, and the TUI.

``-p`` is print (headless) mode, as in other agent CLIs; it takes the prompt as its value, and
``comal --resume UUID -p`` (no value) continues a session headless without a new prompt. Without
``-p`` the interactive TUI opens. Commands (``comal import ...``) are dispatched by the main app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import STATE

agent_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

_BARE_P = "\x00"  # stands for "-p given without a prompt" after argv normalization


def normalize_argv(args: list[str]) -> list[str]:
    """Give a bare ``-p``/``--print`` an explicit empty value so the parser accepts it."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg in ("-p", "--print") and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(_BARE_P)
    return out


def is_agent_invocation(args: list[str]) -> bool:
    """``-p``/``--print``/``--resume`` run the agent; so does nothing at all (the TUI).
    Everything else (a command, ``--help``, ``--version``) goes to the command app."""
    if any(a in ("-p", "--print", "--resume") or a.startswith("--resume=") for a in args):
        return True
    rest = list(args)
    if rest[:1] == ["--ledger"]:
        rest = rest[2:]
    elif rest[:1] and rest[0].startswith("--ledger="):
        rest = rest[1:]
    return not rest


@agent_app.command()
def agent(
    prompt: Annotated[
        str | None, typer.Option("-p", "--print", help="Headless: run PROMPT, print the answer.")
    ] = None,
    resume: Annotated[str | None, typer.Option(help="Continue the session UUID.")] = None,
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
    allow: Annotated[list[str] | None, typer.Option(help="Allow rule, e.g. 'Bash(git *)'.")] = None,
    deny: Annotated[
        list[str] | None, typer.Option(help="Deny rule, e.g. 'Write(secrets/**)'.")
    ] = None,
    workspace: Annotated[Path, typer.Option(help="Files the tools may touch.")] = Path("."),
    max_turns: Annotated[
        int, typer.Option(help="Model calls per run (0: as configured, 50 by default).", min=0)
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable result.")] = False,
    ledger: Annotated[
        Path | None, typer.Option("--ledger", envvar="COMAL_LEDGER", help="Ledger database.")
    ] = None,
) -> None:
    """Run the agent: headless with -p, or the interactive TUI without it.

    Example: comal -p "fix the failing test" --model anthropic:claude-sonnet-4-6 --mode ask
    """
    STATE.ledger_path = ledger
    if prompt is None:
        from ._tui import run_tui

        raise typer.Exit(
            run_tui(
                resume=resume,
                model=model,
                context_window=context_window,
                mode=mode,
                allow=allow or [],
                deny=deny or [],
                workspace=workspace,
            )
        )
    from ._agent import run_prompt

    code = run_prompt(
        None if prompt == _BARE_P else prompt,
        resume=resume,
        model=model,
        context_window=context_window,
        engine=engine,
        mode=mode,
        allow=allow or [],
        deny=deny or [],
        workspace=workspace,
        as_json=as_json,
        max_turns=max_turns,
    )
    raise typer.Exit(code)
