"""House commands: the operation catalog, calling one operation, receipts, and reconciliation
after a crash.

Register with ``for command in _ops.app.registered_commands: app.registered_commands.append(...)``
like the other command groups; the commands are ``tools``, ``call``, ``receipts`` and
``reconcile``. ``tools --surface cli`` lists what ``call`` runs (OPS-1: the command line is a
projection of the one registry, judged by the same house).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    pass
from ..safe_text import safe, safe_json
from ._common import JsonOpt, coded_errors, emit_json, err, ledger, out

app = typer.Typer()

SurfaceOpt = Annotated[
    Literal["model", "cli", "tui", "api"],
    typer.Option("--surface", help="Whose catalog: model | cli | tui | api."),
]
FormatOpt = Annotated[
    Literal["anthropic", "openai"],
    typer.Option("--format", "-f", help="Wire format of the catalog: anthropic | openai."),
]


@app.command()
def tools(
    surface: SurfaceOpt = "model",
    format: FormatOpt = "anthropic",
    model: Annotated[
        str | None,
        typer.Option(
            help="For --surface model: the model whose window plans the deferral "
            "(default: the configured one)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the operation catalog one surface offers; --json prints its exact bytes.

    --surface model prints what an agent session sends its model in its first request, from
    the same functions the agent uses, with the loaded configuration (its plugins, its
    engine's recall tools, the long-work operations) and the tools the deferral keeps behind
    ToolSearch at the model's window. The model's catalog omits the human controls.

    Example: comal tools --surface model --format anthropic --json
    """
    from ..agent import load_config
    from ..agent._catalog import agent_catalog, session_registry
    from ..context import get_engine

    with coded_errors(as_json):
        config = load_config()  # the configuration's plugins add their operations
        registry = session_registry()
        deferred: frozenset[str] = frozenset()
        if surface == "model":
            catalog = agent_catalog(registry, get_engine(config.engine_name()))
            spec = model or config.model
            if spec:
                catalog, deferred = _first_request(config, catalog, spec)
        else:
            catalog = registry.catalog(surface)
        text = catalog.json(format)
    if as_json:
        # An MCP server writes its tools' descriptions: what a terminal acts on is escaped
        # (the same JSON value; the bytes differ only where such a character is).
        sys.stdout.write(safe_json(text) + "\n")
        return
    table = Table("operation", "effects", "audience", "surfaces", "contract", "description")
    for op in catalog.operations:
        cells = (
            op.name,
            ", ".join(e.kind for e in op.effects),
            op.audience,
            ", ".join(sorted(op.surfaces)),
            op.contract.split("@", 1)[1],
            op.description[:60],
        )
        table.add_row(*(escape(safe(c)) for c in cells))
    out.print(table)
    out.print(f"catalog sha256 {catalog.digest} ({len(catalog.operations)} operations)")
    if deferred:
        names = ", ".join(sorted(deferred))
        out.print(f"behind ToolSearch at this model's window: {names}", markup=False)
    elif surface == "model" and not (model or config.model):
        out.print("no model configured: ToolSearch is sent only when tools are deferred "
                  "(give --model to plan the deferral)")  # fmt: skip
    if surface == "model" and config.mcp_servers:
        names = ", ".join(sorted(config.mcp_servers))
        out.print(f"plus the tools of the MCP server(s) {names} once they start", markup=False)
    if surface == "cli":
        out.print("run one: comal call SESSION OPERATION '{\"argument\": ...}'", markup=False)


def _first_request(config: Any, catalog: Any, spec: str) -> tuple[Any, frozenset[str]]:
    """The catalog a new session's first request sends at ``spec``'s window, and the tools
    the deferral (CCH-3) keeps behind ToolSearch."""
    from ..agent import settings_from_config
    from ..agent._catalog import ToolDeferral
    from ..context import View, get_engine
    from ..ops import Catalog
    from ..providers import model_name_of
    from ..tokens import default_counter

    settings = settings_from_config(config, model_name_of(spec))
    engine = get_engine(settings.engine_name)
    deferral = ToolDeferral(catalog, engine, settings.cache, default_counter())
    plan = deferral.plan(View(()), settings.window.window)
    sent = {t["name"] for t in plan.tools}
    kept = tuple(op for op in catalog.operations if op.name in sent)
    return Catalog(catalog.surface, kept), frozenset(plan.deferred)


@app.command("call")
def call_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    operation: Annotated[
        str, typer.Argument(help="An operation `comal tools --surface cli` lists.")
    ],
    arguments: Annotated[
        str, typer.Argument(help="Its arguments, a JSON object (its contract in `comal tools`).")
    ] = "{}",
    mode: Annotated[
        str,
        typer.Option(
            help="read-only | ask | trusted (ask: no approver here, so "
            "what needs approval is denied)."
        ),
    ] = "",
    allow: Annotated[list[str] | None, typer.Option(help="Allow rule, e.g. 'Bash(git *)'.")] = None,
    workspace: Annotated[
        Path | None, typer.Option(help="Files it may touch (default: the session's, else here).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Call one operation as yourself, in a session: judged by the house under the
    configuration's policy, run, and receipted like the model's calls (a call with effects
    takes the session's lock). Exit 1 when it was denied or failed.

    Example: comal call 3f2a Grep '{"pattern": "TODO", "path": "src"}' --mode trusted
    """
    import json

    from ..agent import Flags, Runtime
    from ..errors import UserError

    with coded_errors(as_json), ledger() as led:
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"arguments: not JSON ({exc.msg}); give an object, e.g. '{{}}'"
            ) from None
        if not isinstance(args, dict):
            raise UserError("arguments: give a JSON object of the operation's arguments")
        flags = Flags(mode=mode or None, allow=tuple(allow or ()), workspace=workspace)
        runtime = Runtime.open(led, flags, resume=session, need_model=False)
        with runtime.closing():
            outcome, receipt = runtime.call(operation, args)
    result = outcome.result
    decided = receipt.judgment.get("decision"), receipt.judgment.get("rule")
    label = receipt.label
    if as_json:
        emit_json(
            {
                "session": runtime.need_scope().session,
                "operation": operation,
                "status": receipt.status,
                "judgment": {"decision": decided[0], "rule": decided[1]},
                "result": result.text,
                "is_error": result.is_error,
                "receipt": receipt.record_id,
            }
        )
    else:
        typer.echo(safe(result.text))
        err.print(f"{operation}: {receipt.status} ({safe(label)}); receipt "
                  f"{receipt.record_id}", markup=False, highlight=False)  # fmt: skip
    if receipt.status != "ok" or result.is_error:
        raise typer.Exit(1)


def _judgment_line(body: dict[str, Any]) -> str:
    # A label can quote a part of the model's command: shown, never read as markup.
    from rich.markup import escape

    from ..safe_text import safe

    return escape(safe(str(body["label"])))


@app.command("receipts")
def receipts_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    as_json: JsonOpt = False,
) -> None:
    """List a session's receipts: operation, actor, judgment and rule, status, disposition.

    Example: comal receipts 3f2a --json
    """
    from ..ops import receipts

    with coded_errors(as_json), ledger() as led:
        rows = [r.as_dict() for r in receipts(led, led.resolve(session))]
    if as_json:
        emit_json(rows)
        return
    table = Table("record", "operation", "call", "actor", "judgment", "status", "disposition")
    for r in rows:
        actor = f"{r['actor']['kind']} {r['actor']['id']}"
        cells = (str(r["record"]), r["operation"], r["call_id"], actor, _judgment_line(r),
                 r["status"], r["disposition"])  # fmt: skip
        # A call id and an operation name are the model's words: shown, never acted on.
        table.add_row(*(escape(safe(c)) for c in cells))
    out.print(table)


@app.command("reconcile")
def reconcile_cmd(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    workspace: Annotated[
        Path, typer.Option("--workspace", "-w", help="Workspace root the writes were made in.")
    ] = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Receipt the calls a crash left without one: postcondition_observed, not_applied (the
    write provably did not land: judged and run again) or uncertain.

    Nothing is written to the workspace; uncertain calls are blocked from automatic repetition.

    Example: comal reconcile 3f2a --workspace ~/src/project --json
    """
    from ..agent import load_config
    from ..ops import Workspace, default_registry, reconcile

    with coded_errors(as_json), ledger() as led:
        load_config()  # its plugins: their recovery adapters observe what their calls meant
        report = reconcile(
            led, led.resolve(session), workspace=Workspace(workspace), registry=default_registry()
        )
    rows = [
        {
            "call_id": i.call_id,
            "operation": i.operation,
            "status": i.status,
            "reason": i.reason,
            "receipt": i.receipt,
            "preparation": i.preparation,
        }
        for i in report.items
    ]
    if as_json:
        emit_json({"reconciled": rows, "pending": list(report.pending)})
        return
    for row in rows:
        line = f"{row['call_id']} {row['operation']}: {row['status']} {row['reason']}"
        out.print(safe(line), markup=False, highlight=False)
    out.print(f"{len(rows)} reconciled, {len(report.pending)} pending (never started)")
