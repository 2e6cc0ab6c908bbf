"""``comal doctor``: what this machine and configuration give comal, checked, in one place."""

from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from .. import __version__

if TYPE_CHECKING:
    pass
from ..errors import ComalError
from ..safe_text import safe
from ._common import JsonOpt, emit_json, ledger, ledger_target, out

app = typer.Typer()


def _check(name: str, run: Any) -> dict[str, Any]:
    try:
        detail = run()
    except ComalError as exc:
        return {"check": name, "ok": False, "detail": f"[{exc.code}] {exc}"}
    return {"check": name, "ok": True, "detail": detail}


def checks() -> list[dict[str, Any]]:
    from ..agent import config_path, load_config, policy_from_config
    from ..context import engine_names
    from ..ledger import describe_target
    from ..ops import sandbox_status
    from ..tokens import default_counter

    target = str(ledger_target())

    def ledger_check() -> str:
        with ledger() as led:
            # A count, not a read of every session (a large ledger's doctor stays quick).
            count = led.session_page(limit=0).total
            return f"{describe_target(target)}: {count} session(s)"

    def config_check() -> str:
        config = load_config()
        path = config_path()
        where = str(path) if path.exists() else f"{path} (absent: defaults)"
        return f"{where}; engine {config.engine}, mode {config.mode}"

    def sandbox_check() -> str:
        policy = policy_from_config(load_config(), workspace=None)
        status = sandbox_status(policy.sandbox)
        if not status.active:
            raise _NotActive(status.reason)
        return f"{status.backend} {status.version or ''}: active; {status.reason}".strip()

    return [
        {"check": "comal", "ok": True, "detail": f"{__version__} on Python {sys.version.split()[0]}"
         f" ({platform.system()} {platform.machine()})"},
        _check("ledger", ledger_check),
        _check("configuration", config_check),
        _check("tokenizer", lambda: default_counter().name),
        _check("sandbox", sandbox_check),
        _check("engines", lambda: ", ".join(engine_names())),
        *plugin_checks(),
    ]  # fmt: skip


def plugin_checks() -> list[dict[str, Any]]:
    """One line per plugin (an installed one left out says so); a plugin that cannot be
    loaded is one failed check."""
    from ..agent import load_config
    from ..plugins import plugin_infos
    from ._plugins import summary

    try:
        load_config()  # enables the configuration's plugins: (its own errors: "configuration")
    except ComalError:
        pass
    try:
        rows = [info.as_dict() for info in plugin_infos(include_disabled=True)]
    except ComalError as exc:
        return [{"check": "plugins", "ok": False, "detail": f"[{exc.code}] {exc}"}]
    return [{"check": f"plugin {r['name']}", "ok": True, "detail": summary(r)} for r in rows]


class _NotActive(ComalError):
    code = "SANDBOX_INACTIVE"


def summary_checks(rebuild: bool) -> list[dict[str, Any]]:
    """ENG-3: every session's summaries checked for what the summarizer guards refuse (an
    empty body, an error reply, a cut text, one not smaller than its sources); with
    ``rebuild``, each bad frontier summary rebuilt from its entries (compaction/_doctor.py)."""
    from ..compaction import bad_summaries, rebuild_summaries

    found: list[dict[str, Any]] = []
    rebuilt = 0
    with ledger() as led:
        offset = 0
        while True:
            page = led.session_page(limit=500, offset=offset)
            for info in page.sessions:
                bad = bad_summaries(led, info.scope)
                found += [f.as_dict() for f in bad]
                if bad and rebuild:
                    rebuilt += len(rebuild_summaries(led, info.scope))
            offset += len(page.sessions)
            if not page.remaining or not page.sessions:
                break
    detail: dict[str, Any] | str = "none bad"
    if found:
        detail = {"bad": found, "rebuilt": rebuilt}
    return [{"check": "summaries", "ok": not found or rebuild, "detail": detail}]


@app.command()
def doctor(
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when a check fails.")] = False,
    summaries: Annotated[
        bool,
        typer.Option(
            "--summaries",
            help="Also check every session's summaries for bodies the summarizer guards "
            "refuse (empty, an error reply, cut, not smaller than their sources).",
        ),
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="With --summaries: rebuild each bad summary from its entries (extractive; "
            "the bad row stays in the ledger).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check what comal needs here: the ledger, the configuration, the offline tokenizer and
    the OS sandbox for Bash (bubblewrap), and list the context engines and the plugins.

    Example: comal doctor --json; comal doctor --summaries --rebuild
    """
    results = checks()
    if summaries or rebuild:
        results += summary_checks(rebuild)
    if as_json:
        emit_json(results)
    else:
        table = Table("check", "", "detail", title="comal doctor")
        for r in results:
            mark = "[green]ok[/]" if r["ok"] else "[red]no[/]"
            table.add_row(r["check"], mark, escape(safe(str(r["detail"]))))
        out.print(table)
    if strict and not all(r["ok"] for r in results):
        raise typer.Exit(1)
