"""Memory a person manages (DRV-7): add a note, list, forget — the one implementation behind
``comal memory add|list|forget``, the TUI's ``#``, ``/memory`` and ``/forget`` and the web
page's same (:mod:`comal.serve`).

A note is a memory of the agent (tenant, agent), not of a session: every session of that agent
finds it with ``memory_search``, and it outlives the session it was typed in. Its source is the
person (``user:ana``). A forget is recorded (who, when, why), never a deletion; a forgotten
memory is never listed (but with ``forgotten``) nor found again, and the same text is not
remembered again from later entries (see :mod:`comal.ledger`'s ``_memory_notes``). What a
forget does not do: hide the entries a fact was taken from — they are the session's history,
still found by their words; ``comal rm`` deletes a session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ledger import LedgerBackend, MemoryForget, MemoryRecord
from ..safe_text import one_line

__all__ = [
    "MemoryPage",
    "add_note",
    "forget",
    "list_memories",
    "memory_dict",
    "parse_note",
    "render_forget",
    "render_note",
    "render_page",
    "source_of",
]

_PREFIX = "user:"


def source_of(record: MemoryRecord) -> str:
    """Who or what a memory came from, as a person reads it: ``by ana`` for a note, the
    extractor (``extractive``, ``extractive+provider:model``) for a fact."""
    if record.extractor.startswith(_PREFIX):
        return f"by {record.extractor[len(_PREFIX) :]}"
    return record.extractor


def add_note(
    ledger: LedgerBackend, tenant: str, agent: str, text: str, *, by: str
) -> tuple[MemoryRecord, bool]:
    """Remember ``text`` for the agent as a note by the person ``by`` (``ana``); the memory
    and whether it is new (a text the agent holds already is not stored twice)."""
    return ledger.add_note(tenant, agent, text, by=_PREFIX + by)


def forget(
    ledger: LedgerBackend, tenant: str, agent: str, memory_id: int, *, by: str, why: str = ""
) -> tuple[MemoryForget, bool]:
    """Record that the person ``by`` forgot memory ``memory_id`` of the agent, and ``why``;
    the forget and whether it is new."""
    return ledger.forget_memory(tenant, agent, memory_id, by=_PREFIX + by, why=why)


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """A page of an agent's memories, newest first, each with its forget when it was
    forgotten; ``next`` is the ``before`` of the next page (None: this is the last)."""

    tenant: str
    agent: str
    items: tuple[tuple[MemoryRecord, MemoryForget | None], ...]
    next: int | None

    def as_dict(self) -> dict[str, Any]:
        memories = [memory_dict(m, f) for m, f in self.items]
        return {"tenant": self.tenant, "agent": self.agent, "memories": memories,
                "next": self.next}  # fmt: skip


def list_memories(
    ledger: LedgerBackend,
    tenant: str,
    agent: str,
    *,
    before: int | None = None,
    limit: int = 20,
    forgotten: bool = False,
) -> MemoryPage:
    """A page of the agent's memories, newest first (``forgotten``: those forgotten too)."""
    items = ledger.agent_memories(tenant, agent, before=before, limit=limit, forgotten=forgotten)
    more = items[-1][0].id if len(items) == limit else None
    return MemoryPage(tenant, agent, tuple(items), more)


def memory_dict(m: MemoryRecord, f: MemoryForget | None = None) -> dict[str, Any]:
    """One memory as JSON: what it says, where it came from, and its forget if any."""
    gone = None
    if f is not None:
        gone = {"id": f.id, "by": f.by, "why": f.why, "at": f.created_at}
    return {
        "id": m.id, "kind": m.kind, "text": m.text, "source": m.extractor,
        "session": m.session, "first_seq": m.first_seq, "last_seq": m.last_seq,
        "entry_ids": list(m.entry_ids), "created_at": m.created_at, "digest": m.digest,
        "forgotten": gone,
    }  # fmt: skip


def _origin(m: MemoryRecord) -> str:
    if m.session is None:
        return source_of(m)
    seqs = f"seq {m.first_seq}" + (f"..{m.last_seq}" if m.last_seq != m.first_seq else "")
    ids = ", ".join(map(str, m.entry_ids[:4])) + ("…" if len(m.entry_ids) > 4 else "")
    return f"{source_of(m)} · session {m.session[:8]} {seqs} (entries {ids})"


def render_page(page: MemoryPage, *, more: str = "") -> str:
    """The page for a person: one memory a line, newest first; its text and kind escaped to
    one line (a fact is quoted from untrusted history, as in ``memory_search``)."""
    if not page.items:
        return f"agent {page.agent!r} of tenant {page.tenant!r} remembers nothing yet"
    lines = [f"memories of agent {page.agent!r} (tenant {page.tenant!r}), newest first:"]
    for m, f in page.items:
        when = m.created_at[:16].replace("T", " ")
        text = one_line(m.text)
        text = text if len(text) <= 200 else text[:199] + "…"
        lines.append(f"{m.id:>6}  {when}  {one_line(m.kind):<10} {_origin(m)}: {text}")
        if f is not None:
            why = f": {one_line(f.why)}" if f.why else ""
            who = f.by[len(_PREFIX) :] if f.by.startswith(_PREFIX) else f.by
            lines.append(f"        forgotten {f.created_at[:16].replace('T', ' ')} by {who}{why}")
    if page.next is not None and more:
        lines.append(more.replace("{next}", str(page.next)))
    return "\n".join(lines)


def render_note(m: MemoryRecord, added: bool, *, undo: str) -> str:
    """Where a note went, said back to the person who typed it (``undo``: how to take it back,
    with ``{id}``)."""
    whose = f"agent {m.agent!r} (tenant {m.tenant!r})"
    if not added:
        return (
            f"already remembered as memory {m.id} ({one_line(m.kind)}, {source_of(m)}) of "
            f"{whose}: nothing added"
        )
    return (
        f"remembered as memory {m.id}: a note of {whose}, {source_of(m)}; every session of "
        f"this agent finds it with memory_search. {undo.replace('{id}', str(m.id))}"
    )


def render_forget(f: MemoryForget, new: bool) -> str:
    who = f.by[len(_PREFIX) :] if f.by.startswith(_PREFIX) else f.by
    why = f" ({one_line(f.why)})" if f.why else ""
    if not new:
        return f"memory {f.memory} was forgotten already, by {who} at {f.created_at[:16]}{why}"
    return (
        f"forgot memory {f.memory} of agent {f.agent!r}{why}: memory_search and the list no "
        "longer show it, and the same text is not remembered again from later entries"
    )


def parse_note(text: str) -> str | None:
    """The note of a prompt that starts with ``#`` (the TUI's and the page's shortcut); None
    when the prompt is not one."""
    if not text.startswith("#"):
        return None
    return text[1:].strip()
