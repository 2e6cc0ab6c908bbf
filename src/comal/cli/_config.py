"""``comal config``: the effective configuration and where each value came from (CFG-1).

``comal config show`` prints every setting with its source (default, file, env, flag);
``comal config check FILE`` validates a file; ``comal config reference`` prints the reference
generated from the pydantic models (``docs/configuration.md`` is its output).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    pass
from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, out

app = typer.Typer(
    help="The configuration: show effective values and their sources, check a file.\n\n"
    "Example: comal config show --json",
    no_args_is_help=True,
)


def _value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


@app.command()
def show(
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Read this file (default: COMAL_CONFIG or the usual one)."),
    ] = None,
    agent: Annotated[str | None, typer.Option(help="Show the settings of this agent.")] = None,
    model: Annotated[str | None, typer.Option(help="As the --model flag would set it.")] = None,
    engine: Annotated[str | None, typer.Option(help="As the --engine flag would set it.")] = None,
    mode: Annotated[str | None, typer.Option(help="As the --mode flag would set it.")] = None,
    effort: Annotated[str | None, typer.Option(help="As the --effort flag would set it.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="As --max-turns would set it.")] = None,
    context_window: Annotated[
        int | None, typer.Option(help="As --context-window would cap it.", min=1)
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print every effective setting, where it came from (default, file, env, flag), its
    allowed range, and whether only the operator may set it.

    Example: comal config show --agent reviewer --engine limit --json
    """
    from ..agent import explain_config

    flags = {
        "model": model,
        "engine": engine,
        "mode": mode,
        "effort": effort,
        "max_turns": max_turns,
        "context_window": context_window,
    }
    with coded_errors(as_json):
        path, settings = explain_config(file, flags=flags, agent=agent)
    if as_json:
        emit_json(
            {
                "file": str(path),
                "file_exists": path.exists(),
                "settings": [s.as_dict() for s in settings],
            }
        )
        return
    where = str(path) if path.exists() else f"{path} (absent: defaults)"
    table = Table("key", "value", "source", "allowed", title=f"configuration from {where}")
    for s in settings:
        src = s.source + (f" ({s.origin})" if s.origin else "")
        key = s.key + (" *" if s.operator_only else "")
        table.add_row(escape(key), escape(safe(_value(s.value))), escape(src), s.allowed or "")
    table.caption = "* operator-only: no operation the model can call changes it (CFG-2)"
    out.print(table)


@app.command()
def check(
    file: Annotated[Path, typer.Argument(help="The configuration file to validate.")],
    as_json: JsonOpt = False,
) -> None:
    """Validate a configuration file (YAML, TOML or JSON by its suffix) without using it: an
    error names the file, the key and the allowed range, and exits 2.

    Example: comal config check ~/.config/comal/config.yaml
    """
    from ..agent import check_config

    with coded_errors(as_json):
        config = check_config(file)
    keys = sorted(config.model_dump(exclude_defaults=True))
    if as_json:
        emit_json({"ok": True, "file": str(file), "keys": keys, "agents": sorted(config.agents)})
        return
    out.print(
        f"{escape(str(file))}: valid; sets {', '.join(keys) or 'nothing (all defaults)'}",
        highlight=False,
    )


@app.command()
def reference() -> None:
    """Print the configuration reference (Markdown) generated from the pydantic models.

    Example: comal config reference > docs/configuration.md
    """
    from ..agent import configuration_reference

    typer.echo(configuration_reference(), nl=False)


@app.command()
def path() -> None:
    """Print the configuration file comal reads (it may not exist).

    Example: comal config path
    """
    from ..agent import config_path

    typer.echo(str(config_path()))
