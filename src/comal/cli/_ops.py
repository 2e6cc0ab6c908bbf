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
from rich.table import Table

if TYPE_CHECKING:
    pass
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
    as_json: JsonOpt = False,
) -> None:
    """Print the operation catalog one surface offers; --json prints its exact bytes.

    The model's catalog omits the human controls (model, effort, mode, name, login).

    Example: comal tools --surface model --format anthropic --json
    """
    from ..agent import HUMAN_OPERATIONS, load_config
    from ..ops import default_registry

    with coded_errors(as_json):
        load_config()  # the configuration's plugins: add their operations to the catalog
        registry = default_registry()
        registry.add_all(HUMAN_OPERATIONS)  # context, state, compact: never on the model's
        catalog = registry.catalog(surface)
        text = catalog.json(format)
    if as_json:
        sys.stdout.write(text + "\n")
        return
    table = Table("operation", "effects", "audience", "surfaces", "contract", "description")
    for op in catalog.operations:
        table.add_row(
            op.name,
            ", ".join(e.kind for e in op.effects),
            op.audience,
            ", ".join(sorted(op.surfaces)),
            op.contract.split("@", 1)[1],
            op.description[:60],
        )
    out.print(table)
    out.print(f"catalog sha256 {catalog.digest} ({len(catalog.operations)} operations)")
    if surface == "cli":
        out.print("run one: comal call SESSION OPERATION '{\"argument\": ...}'", markup=False)


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
    from ..safe_text import safe

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
        table.add_row(
            str(r["record"]),
            r["operation"],
            r["call_id"],
            actor,
            _judgment_line(r),
            r["status"],
            r["disposition"],
        )
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
        out.print(f"{row['call_id']} {row['operation']}: {row['status']} {row['reason']}")
    out.print(f"{len(rows)} reconciled, {len(report.pending)} pending (never started)")
