"""``comal plugins``: the plugins this process enables and what each registers (PLG-1)."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, out

app = typer.Typer()


def plugin_rows() -> list[dict[str, Any]]:
    """Every plugin as a dict: built-ins, entry points, the configuration's ``plugins:``
    (loading the configuration is what enables those), then the installed entry points the
    operator left out (``enabled`` false: never imported, so they register nothing)."""
    from ..agent import load_config
    from ..plugins import plugin_infos

    load_config()
    return [info.as_dict() for info in plugin_infos(include_disabled=True)]


def summary(row: dict[str, Any]) -> str:
    """What a plugin registers, in one line (``comal doctor`` shows it)."""
    parts = []
    for key, noun in (
        ("operations", "operations"),
        ("providers", "schemes"),
        ("engines", "engines"),
        ("job_handlers", "job handlers"),
        ("wire_protocols", "protocols"),
    ):
        if row[key]:
            parts.append(f"{noun} {', '.join(row[key])}")
    where = row["source"] + (f" {row['version']}" if row["version"] else "")
    if not row.get("enabled", True):
        return f"{where}: installed, not enabled (installed_plugins: listed does not name it)"
    return f"{where}: " + ("; ".join(parts) or "registers nothing")


@app.command()
def plugins(as_json: JsonOpt = False) -> None:
    """List the plugins — built in, installed entry points (group comal.plugins, read from the
    interpreter's site-packages only) and the modules the configuration names under plugins: —
    whether each is enabled, and what it registers: operations, model schemes, context
    engines, job handlers, wire protocols. Plugins are enabled by the operator only: with
    installed_plugins: listed (or COMAL_INSTALLED_PLUGINS=listed) an installed plugin the
    configuration does not name is listed as not enabled and never imported. docs/plugins.md
    says how to write one.

    Example: comal plugins --json
    """
    with coded_errors(as_json):
        rows = plugin_rows()
    if as_json:
        emit_json(rows)
        return
    table = Table(
        "plugin", "source", "version", "enabled", "operations", "schemes", "engines",
        "job handlers", "protocols", title="comal plugins",
    )  # fmt: skip
    kinds = ("operations", "providers", "engines", "job_handlers", "wire_protocols")
    for r in rows:
        cells = [r["name"], r["source"], r["version"] or "", "yes" if r["enabled"] else "no"]
        cells += [", ".join(r[k]) for k in kinds]
        table.add_row(*(escape(safe(str(c))) for c in cells))
    out.print(table)
