"""The TUI's memory commands (DRV-7): ``# TEXT`` remembers a note for the session's agent
instead of sending a prompt (Claude Code's ``#``), ``/memory`` lists the agent's memories
(``/memory WORDS`` searches them as the model would), ``/forget ID [why]`` forgets one. Each is
:mod:`comal.memory`'s, as ``comal memory add|list|search|forget``; what it says back names
where the note went and how to take it back."""

from __future__ import annotations

from ..agent import Runtime
from ..memory import (
    add_note,
    forget,
    list_memories,
    memory_search,
    parse_note,
    render_forget,
    render_note,
    render_page,
    render_recalled,
)

__all__ = ["tui_memory"]


def tui_memory(rt: Runtime, name: str, value: str) -> str:
    """What ``remember`` (``value`` the prompt typed, ``#`` first), ``memory`` or ``forget``
    did, to show the person."""
    scope = rt.scope
    tenant, agent = (scope.tenant, scope.agent) if scope else (rt.config.tenant, rt.config.agent)
    if name == "remember":
        note = parse_note(value)
        if not note:
            return "# needs the fact to remember, e.g. # deploys go through scripts/ship.sh"
        memory, added = add_note(rt.ledger, tenant, agent, note, by=rt.user)
        return render_note(memory, added, undo="/forget {id} takes it back.")
    if name == "forget":
        number, _, why = value.partition(" ")
        if not number.isdigit():
            return "/forget needs a memory's id, e.g. /forget 42 it moved (/memory lists them)"
        done, new = forget(rt.ledger, tenant, agent, int(number), by=rt.user, why=why.strip())
        return render_forget(done, new)
    if value:
        own = scope.session if scope is not None else None
        return render_recalled(value, memory_search(rt.ledger, tenant, agent, value, session=own))
    page = list_memories(rt.ledger, tenant, agent, limit=20)
    more = f"older ones: comal memory list --tenant {tenant} --agent {agent} --before {{next}}"
    return render_page(page, more=more)
