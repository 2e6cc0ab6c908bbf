"""``memory_search``: what one agent remembers, and its past sessions, ranked as one list (MEM-2).

Two rankings come from the ledger's full-text index, each by its own engine (FTS5's BM25 on
SQLite, ``ts_rank`` on PostgreSQL), for the same words: the memories of (tenant, agent), from
every session, and the entries of that agent's *other* sessions (the caller's own session is
``ctx_search``'s and ``session_search``'s). They are fused by reciprocal rank, because two
rankings over two corpora have scores that do not compare, while ranks do: an entry at rank
``r`` scores ``1 / (60 + r)``, a memory half that. A memory is a cue taken from an entry, the
entry is the evidence itself; on LoCoMo (``comal bench recall``) equal weights let memories'
less precise hits push evidence out of the top ten. A memory and an entry it was taken from
are one result — the memory, scored for both, so agreement lifts it. Ties go to entries, then
to the newer session.

The scope is (tenant, agent) and nothing wider: both must be given (else
:class:`~comal.errors.ScopeError`, never a search of everything), and a caller's session that
does not belong to them refuses the search the same way. A work step's session is its
coordinator's agent's, so a step recalls what that agent holds (its coordinator's sessions and
their steps) and nothing of another agent's. Before that, every step of every agent ran as one
shared agent, :data:`LEGACY_STEP_AGENT`: its sessions mix agents, so no session of that agent
may search (a step resumed from such a ledger is refused); the operator may still name it with
``--tenant`` and ``--agent``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ScopeError
from ..ledger import Entry, LedgerBackend, MemoryRecord, Scope, SessionInfo
from ..safe_text import one_line

__all__ = ["FUSION_K", "LEGACY_STEP_AGENT", "Recalled", "memory_search", "render_recalled"]

FUSION_K = 60
# The agent id every work step of every agent ran under before steps ran as their
# coordinator's agent (see the module docstring).
LEGACY_STEP_AGENT = "subagent"
MEMORY_WEIGHT = 0.5
SNIPPET_CHARS = 480


@dataclass(frozen=True, slots=True)
class Recalled:
    """One result: a memory (``kind`` "memory", ``label`` its kind, ``text`` the fact) or an
    entry of a past session (``kind`` "entry", ``label`` its role, ``text`` a snippet around
    the words found). ``entry_ids`` are the entries it stands on, seq ``first_seq..last_seq``
    of ``session`` (``session_title`` and ``session_started`` from its row); ``score`` is the
    fused rank score."""

    kind: str
    id: int
    session: str
    first_seq: int
    last_seq: int
    entry_ids: tuple[int, ...]
    label: str
    text: str
    score: float
    session_title: str | None = None
    session_started: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["entry_ids"] = list(self.entry_ids)
        out["score"] = round(self.score, 6)
        return out


def _snippet(text: str, query: str) -> str:
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = [i for w in re.findall(r"\w+", query.lower()) if (i := lowered.find(w)) >= 0]
    start = max(0, min(found, default=0) - SNIPPET_CHARS // 4)
    cut = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + cut + ("…" if start + SNIPPET_CHARS < len(flat) else "")


def _from_memory(m: MemoryRecord, score: float) -> Recalled:
    return Recalled("memory", m.id, m.session, m.first_seq, m.last_seq, m.entry_ids, m.kind,
                    m.text, score)  # fmt: skip


def _from_entry(e: Entry, query: str, score: float) -> Recalled:
    return Recalled("entry", e.id, e.session, e.seq, e.seq, (e.id,), e.role,
                    _snippet(e.message.text, query), score)  # fmt: skip


def fuse(
    memories: Sequence[MemoryRecord], entries: Sequence[Entry], query: str, limit: int
) -> list[Recalled]:
    """Reciprocal-rank fusion of the two rankings (see the module docstring)."""
    scored: dict[tuple[str, int], Recalled] = {}
    owner: dict[int, tuple[str, int]] = {}  # entry id -> the best memory taken from it
    for rank, m in enumerate(memories, start=1):
        scored[("memory", m.id)] = _from_memory(m, MEMORY_WEIGHT / (FUSION_K + rank))
        for eid in m.entry_ids:
            owner.setdefault(eid, ("memory", m.id))
    for rank, e in enumerate(entries, start=1):
        score = 1 / (FUSION_K + rank)
        key = owner.get(e.id)
        if key is not None:
            found = scored[key]
            scored[key] = Recalled(**{**asdict(found), "score": found.score + score})
        else:
            scored[("entry", e.id)] = _from_entry(e, query, score)
    ranked = sorted(
        scored.values(), key=lambda r: (-r.score, r.kind == "memory", -r.first_seq, -r.id)
    )
    return ranked[:limit]


def memory_search(
    ledger: LedgerBackend,
    tenant: str | None,
    agent: str | None,
    query: str,
    *,
    session: str | None = None,
    limit: int = 10,
    memories: bool = True,
    sessions: bool = True,
) -> list[Recalled]:
    """The memories of (``tenant``, ``agent``) and the entries of its sessions other than
    ``session`` (the caller's, which must be theirs) matching any of the words of ``query``,
    best first (see the module docstring)."""
    if not tenant or not agent:
        missing = " and ".join(n for n, v in (("tenant", tenant), ("agent", agent)) if not v)
        raise ScopeError(
            f"memory_search needs a tenant and an agent; {missing} missing: it never searches "
            "every agent's memories (give a session, or a tenant and an agent)"
        )
    if session is not None and agent == LEGACY_STEP_AGENT:
        raise ScopeError(
            f"agent {agent!r} is the one id an older comal gave the work steps of every agent: "
            "its sessions are not one agent's, so no session of it may search them; nothing "
            "was searched (steps run as their coordinator's agent now)"
        )
    if session is not None and ledger.session(Scope(tenant, agent, session)) is None:
        raise ScopeError(
            f"session {session} is not one of tenant {tenant!r} agent {agent!r}'s: nothing "
            "was searched"
        )
    found_m = ledger.search_memories(tenant, agent, query, limit=limit) if memories else []
    found_e = (
        ledger.search_sessions(tenant, agent, query, limit=limit, exclude=session)
        if sessions
        else []
    )
    results = fuse([m for m, _ in found_m], [e for e, _ in found_e], query, limit)
    infos: dict[str, SessionInfo | None] = {
        sid: ledger.session(Scope(tenant, agent, sid)) for sid in {r.session for r in results}
    }
    out = []
    for r in results:
        info = infos.get(r.session)
        if info is None:
            continue  # not this agent's after all: never shown
        out.append(Recalled(**{**asdict(r), "session_title": info.title,
                               "session_started": info.created_at}))  # fmt: skip
    return out


def render_recalled(query: str, results: Sequence[Recalled]) -> str:
    """The results as the model (and ``comal memory search``) reads them. What comes from
    history (a fact, a snippet, a kind) is quoted on its result's line with every control,
    bidi and invisible character escaped (:func:`~comal.safe_text.one_line`): a hostile output
    read once can neither act on a terminal nor pose as another result line; its exact bytes
    are the entries named."""
    lines = [
        f"memory_search {query!r}: {len(results)} result(s) from this agent's memories and "
        "past sessions, best first."
    ]
    for r in results:
        when = r.session_started[:10]
        title = f" {r.session_title!r}" if r.session_title else ""
        where = f"session {r.session[:8]}{title} of {when}, seq {r.first_seq}"
        where += f"..{r.last_seq}" if r.last_seq != r.first_seq else ""
        label = one_line(r.label)
        head = f"memory {r.id} ({label})" if r.kind == "memory" else f"{label} entry {r.id}"
        lines.append(f"- {head}, {where}: {one_line(r.text)}")
    if not results:
        lines.append("Nothing matched; try other words or fewer of them.")
    else:
        lines.append(
            "Memories are facts taken from the entries named, recall cues rather than proof; "
            "past sessions are not this session's evidence."
        )
    return "\n".join(lines)
