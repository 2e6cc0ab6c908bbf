"""``comal memory``: what an agent remembers across its sessions (MEM-2)."""

from __future__ import annotations

from typing import Annotated

import typer

from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

app = typer.Typer(
    help="Memories across sessions: facts saved before summaries, searched.\n\n"
    'Example: comal memory search "deploy target" --session 3f2a'
)


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="Words to look for (any of them may match).")],
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="Search as this session's model would (a unique prefix is enough): its "
            "tenant and agent, its other sessions.",
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant (with --agent).")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Agent (with --tenant).")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many.", min=1, max=50)] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search one agent's memories and past sessions, best first: the memory_search
    operation's results. Give --session, or both --tenant and --agent; nothing wider is ever
    searched.

    Example: comal memory search "deploy target" --tenant local --agent comal --json
    """
    from ..errors import ScopeError, UserError
    from ..memory import memory_search, render_recalled

    with coded_errors(as_json), ledger() as led:
        if session is not None:
            if tenant is not None or agent is not None:
                raise UserError(
                    "give --session, or --tenant and --agent, not both: a session names its "
                    "own tenant and agent"
                )
            scope = led.resolve(session)
            tenant, agent, own = scope.tenant, scope.agent, scope.session
        elif tenant is None or agent is None:
            raise ScopeError(
                "comal memory search needs --session, or both --tenant and --agent: it never "
                "searches every agent's memories"
            )
        else:
            own = None
        found = memory_search(led, tenant, agent, query, session=own, limit=limit)
    if as_json:
        results = [r.as_dict() for r in found]
        emit_json({"tenant": tenant, "agent": agent, "results": results}, escaped=True)
        return
    # Memories and past messages came from untrusted history: shown escaped.
    out.print(safe(render_recalled(query, found)), markup=False, highlight=False)
