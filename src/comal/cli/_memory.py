"""``comal memory``: what an agent remembers across its sessions, and what a person tells it to
remember or forget (MEM-2, DRV-7)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..safe_text import safe
from ._common import JsonOpt, coded_errors, emit_json, ledger, out

if TYPE_CHECKING:
    from ..ledger import LedgerBackend

app = typer.Typer(
    help="Memories across sessions: facts saved before summaries and notes a person adds; "
    "search, list, add, forget.\n\n"
    'Example: comal memory add "deploys go through scripts/ship.sh" --tenant local --agent comal'
)

SessionOpt = Annotated[
    str | None,
    typer.Option(
        "--session",
        help="The agent of this session (a unique prefix is enough): its tenant and agent.",
    ),
]
TenantOpt = Annotated[str | None, typer.Option("--tenant", help="Tenant (with --agent).")]
AgentOpt = Annotated[str | None, typer.Option("--agent", help="Agent (with --tenant).")]


def _agent(
    led: LedgerBackend, command: str, session: str | None, tenant: str | None, agent: str | None
) -> tuple[str, str, str | None]:
    """(tenant, agent, session) a command acts on: --session's, or --tenant and --agent;
    never every agent's."""
    from ..errors import ScopeError, UserError

    if session is not None:
        if tenant is not None or agent is not None:
            raise UserError(
                "give --session, or --tenant and --agent, not both: a session names its "
                "own tenant and agent"
            )
        scope = led.resolve(session)
        return scope.tenant, scope.agent, scope.session
    if tenant is None or agent is None:
        raise ScopeError(
            f"comal memory {command} needs --session, or both --tenant and --agent: it never "
            "acts on every agent's memories"
        )
    return tenant, agent, None


def _person() -> str:
    import getpass

    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"


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
    tenant: TenantOpt = None,
    agent: AgentOpt = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many.", min=1, max=50)] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search one agent's memories and past sessions, exact matches first, each result saying
    why it matched: the memory_search operation's results. Give --session, or both --tenant
    and --agent; nothing wider is ever searched.

    Example: comal memory search "hello.txt" --tenant local --agent comal --json
    """
    from ..memory import memory_search, render_recalled

    with coded_errors(as_json), ledger() as led:
        tenant, agent, own = _agent(led, "search", session, tenant, agent)
        found = memory_search(led, tenant, agent, query, session=own, limit=limit)
    if as_json:
        results = [r.as_dict() for r in found]
        emit_json({"tenant": tenant, "agent": agent, "results": results}, escaped=True)
        return
    # Memories and past messages came from untrusted history: shown escaped.
    out.print(safe(render_recalled(query, found)), markup=False, highlight=False)


@app.command("add")
def add_cmd(
    text: Annotated[str, typer.Argument(help="The fact to remember, in your words.")],
    session: SessionOpt = None,
    tenant: TenantOpt = None,
    agent: AgentOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember a fact for one agent, as a note by you: every session of that agent finds it
    with memory_search (the TUI's and the web page's "# text" do the same). A text the agent
    already remembers is not added twice.

    Example: comal memory add "deploys go through scripts/ship.sh" --tenant local --agent comal
    """
    from ..memory import add_note, memory_dict, render_note

    with coded_errors(as_json), ledger(create=True) as led:
        tenant, agent, _ = _agent(led, "add", session, tenant, agent)
        memory, added = add_note(led, tenant, agent, text, by=_person())
    if as_json:
        emit_json({"added": added, "memory": memory_dict(memory)})
        return
    undo = "`comal memory forget {id}` takes it back."
    out.print(safe(render_note(memory, added, undo=undo)), markup=False, highlight=False)


@app.command("list")
def list_cmd(
    session: SessionOpt = None,
    tenant: TenantOpt = None,
    agent: AgentOpt = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many.", min=1, max=200)] = 20,
    before: Annotated[
        int | None, typer.Option("--before", help="Only memories older than this id (paging).")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Forgotten memories too, marked so.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """One agent's memories, newest first: each with its kind, where it came from (a note's
    person; a fact's extractor, session and entries) and, with --all, its forget.

    Example: comal memory list --tenant local --agent comal --all
    """
    from ..memory import list_memories, render_page

    with coded_errors(as_json), ledger() as led:
        tenant, agent, _ = _agent(led, "list", session, tenant, agent)
        page = list_memories(led, tenant, agent, before=before, limit=limit, forgotten=show_all)
    if as_json:
        emit_json(page.as_dict())
        return
    more = "more: --before {next}"
    out.print(safe(render_page(page, more=more)), markup=False, highlight=False)


@app.command("forget")
def forget_cmd(
    memory_id: Annotated[int, typer.Argument(help="The memory's id (comal memory list).")],
    session: SessionOpt = None,
    tenant: TenantOpt = None,
    agent: AgentOpt = None,
    why: Annotated[str, typer.Option("--why", help="Why it should be forgotten.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Forget one of an agent's memories: recorded (by you, now, --why), never deleted; it is
    not listed or found by memory_search again, and the same text is not remembered again
    from later entries. The entries it came from stay in their session.

    Example: comal memory forget 42 --tenant local --agent comal --why "moved to ship2.sh"
    """
    from ..memory import forget, render_forget

    with coded_errors(as_json), ledger() as led:
        tenant, agent, _ = _agent(led, "forget", session, tenant, agent)
        done, new = forget(led, tenant, agent, memory_id, by=_person(), why=why)
    if as_json:
        forgotten = {"id": done.id, "by": done.by, "why": done.why, "at": done.created_at}
        emit_json({"memory": done.memory, "new": new, "forgotten": forgotten})
        return
    out.print(safe(render_forget(done, new)), markup=False, highlight=False)
