"""Ledger commands: sessions, show, export, verify."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from ..ledger import SessionInfo, verify
from ..messages import Message, Role
from ..messages.wire import to_anthropic, to_openai_chat, to_openai_responses
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

app = typer.Typer()


def _session_dict(s: SessionInfo) -> dict[str, Any]:
    return {
        "session": s.id,
        "tenant": s.tenant,
        "agent": s.agent,
        "parent": s.parent,
        "entries": s.entries,
        "tokens": s.tokens,
        "status": s.status,
        "title": s.title,
        "source": s.source,
        "started": s.created_at,
    }


@app.command()
def sessions(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    agent: Annotated[str | None, typer.Option(help="Only this agent.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List sessions: id, tenant/agent, entries, tokens, started, status.

    Example: comal sessions --tenant local --json
    """
    with coded_errors(as_json), ledger() as led:
        rows = led.sessions(tenant=tenant, agent=agent)
    if as_json:
        emit_json([_session_dict(s) for s in rows])
        return
    table = Table("session", "tenant/agent", "entries", "tokens", "started", "status", "title")
    for s in rows:
        table.add_row(
            s.id,
            f"{s.tenant}/{s.agent}",
            str(s.entries),
            f"{s.tokens:,}",
            s.created_at[:19].replace("T", " "),
            s.status,
            (s.title or s.source or "")[:48],
        )
    out.print(table)


def _preview(msg: Message, width: int = 160) -> str:
    bits: list[str] = []
    for call in msg.tool_calls:
        bits.append(f"→ {call.name}({call.arguments[:80]})")
    result = msg.tool_result
    if result is not None:
        flag = " [error]" if result.is_error else ""
        bits.append(f"← {result.call_id}{flag}: {result.text[:width]}")
    elif msg.role is not Role.ASSISTANT or not bits:
        bits.insert(0, msg.text[:width])
    return " ".join(bits).replace("\n", "⏎ ")


@app.command()
def show(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    tail: Annotated[int | None, typer.Option(help="Only the last N entries.", min=1)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a session's entries (or the last N), one line each.

    Example: comal show 3f2a --tail 20
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        entries = led.tail(scope, n=tail) if tail else led.entries(scope)
    if as_json:
        from ..messages import message_to_dict

        emit_json(
            [
                {
                    "id": e.id,
                    "seq": e.seq,
                    "step": e.step,
                    "role": e.role,
                    "tokens": e.tokens,
                    "digest": e.digest,
                    "output_digest": e.output_digest,
                    "message": message_to_dict(e.message),
                }
                for e in entries
            ]
        )
        return
    table = Table("seq", "step", "role", "tokens", "content", show_lines=False)
    for e in entries:
        table.add_row(str(e.seq), str(e.step), e.role, str(e.tokens), _preview(e.message))
    out.print(table)


@app.command()
def export(
    session: Annotated[str, typer.Argument(help="Session id (a unique prefix is enough).")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="openai | openai-responses | anthropic")
    ] = "openai",
    as_json: JsonOpt = False,
) -> None:
    """Print the whole session as a provider's message list (JSON). Tool outputs are exact.

    Example: comal export 3f2a --format anthropic > session.json
    """
    with coded_errors(as_json), ledger() as led:
        scope = led.resolve(session)
        messages = [e.message for e in led.iter_entries(scope)]
    payload: Any
    if format == "openai":
        payload = to_openai_chat(messages)
    elif format == "openai-responses":
        payload = to_openai_responses(messages)
    elif format == "anthropic":
        payload = to_anthropic(messages)
    else:
        raise typer.BadParameter(f"unknown format {format!r}", param_hint="--format")
    typer.echo(json.dumps(payload, ensure_ascii=False, indent=None if as_json else 1))


@app.command("verify")
def verify_cmd(as_json: JsonOpt = False) -> None:
    """Re-hash every stored entry and check every step is whole; exit 1 on any fault.

    Example: comal verify --json
    """
    with coded_errors(as_json), ledger() as led:
        report = verify(led)
    if as_json:
        emit_json(report.as_dict())
    else:
        status = "[green]ok[/]" if report.ok else f"[red]{len(report.faults)} fault(s)[/]"
        out.print(f"verified {report.entries:,} entries: {status}")
        for f in report.faults[:50]:
            out.print(f"  {f.session} seq {f.seq}: {f.kind}: {f.detail}")
        if report.paused:
            out.print(f"  paused (ending in open tool calls): {', '.join(report.paused)}")
    if not report.ok:
        raise typer.Exit(1)
