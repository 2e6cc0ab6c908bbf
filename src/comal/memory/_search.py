"""``memory_search``: what one agent remembers, and its past sessions, ranked as one list (MEM-2,
DRV-7).

Exact matches come first. Each result says why it matched (:mod:`._why`): ``exact`` (the
query's text as typed, so ``hello.txt`` finds the entries that literally say ``hello.txt``),
``phrase`` (its words side by side, in order), else ``words`` (some of its words, named); a
result in a better class always ranks above one in a worse. Within a class the ranking is the
ledger's full-text ranking, each by its own engine (FTS5's BM25 on SQLite, ``ts_rank`` on
PostgreSQL): the memories of (tenant, agent) — facts from every session and a person's notes,
never a forgotten one — and the entries of that agent's *other* sessions (the caller's own
session is ``ctx_search``'s and ``session_search``'s). The two are fused by reciprocal rank,
because two rankings over two corpora have scores that do not compare, while ranks do: an
entry at rank ``r`` scores ``1 / (60 + r)``, a memory half that. A memory is a cue taken from
an entry, the entry is the evidence itself; on LoCoMo (``comal bench recall``) equal weights
let memories' less precise hits push evidence out of the top ten. A memory and an entry it was
taken from are one result — the memory, scored for both and in the better class of the two.
Ties go to entries, then to the newer session.

Bounded: a query of two or more words runs two full-text queries per corpus (its words, any of
them; and its words as a phrase, at most :data:`PHRASE_POOL` results), and only the texts
those return are read for an exact match — never a scan of the agent's history.

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
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..errors import ScopeError
from ..ledger import Entry, LedgerBackend, MemoryRecord, Scope, SessionInfo
from ..safe_text import one_line
from ._why import HOW, Match, Query, why

__all__ = [
    "FUSION_K",
    "LEGACY_STEP_AGENT",
    "PHRASE_POOL",
    "Recalled",
    "memory_search",
    "render_recalled",
]

FUSION_K = 60
# The agent id every work step of every agent ran under before steps ran as their
# coordinator's agent (see the module docstring).
LEGACY_STEP_AGENT = "subagent"
MEMORY_WEIGHT = 0.5
SNIPPET_CHARS = 480
PHRASE_POOL = 50  # phrase matches read per corpus for the exact ones (the ledger's MAX_RESULTS)


@dataclass(frozen=True, slots=True)
class Recalled:
    """One result: a memory (``kind`` "memory", ``label`` its kind, ``text`` the fact) or an
    entry of a past session (``kind`` "entry", ``label`` its role, ``text`` a snippet around
    the words found). ``entry_ids`` are the entries it stands on, seq ``first_seq..last_seq``
    of ``session`` (``session_title`` and ``session_started`` from its row); a person's note
    has no session, seqs or entries, and ``source`` says who wrote it (``user:ana``; for a
    fact, its extractor). ``score`` is the fused rank score within its ``match`` class, and
    ``match`` says why it matched."""

    kind: str
    id: int
    session: str | None
    first_seq: int | None
    last_seq: int | None
    entry_ids: tuple[int, ...]
    label: str
    text: str
    score: float
    session_title: str | None = None
    session_started: str = ""
    match: Match | None = None
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["entry_ids"] = list(self.entry_ids)
        out["score"] = round(self.score, 6)
        out["match"] = self.match.as_dict() if self.match is not None else None
        return out

    @property
    def rank(self) -> int:
        return self.match.rank if self.match is not None else len(HOW)


def _snippet(text: str, query: str) -> str:
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = [i for w in re.findall(r"\w+", query.lower()) if (i := lowered.find(w)) >= 0]
    start = max(0, min(found, default=0) - SNIPPET_CHARS // 4)
    cut = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + cut + ("…" if start + SNIPPET_CHARS < len(flat) else "")


def _ranks(*rankings: Sequence[Any]) -> list[dict[int, int]]:
    return [{x.id: k for k, x in enumerate(ranking, start=1)} for ranking in rankings]


def _score(match: Match, weight: float, phrase_rank: int | None, word_rank: int | None) -> float:
    # A result in the exact or phrase class is ranked where the phrase query put it.
    rank = phrase_rank if match.how != "words" and phrase_rank else word_rank or phrase_rank
    return weight / (FUSION_K + (rank or FUSION_K))


def fuse(
    memories: tuple[Sequence[MemoryRecord], Sequence[MemoryRecord]],
    entries: tuple[Sequence[Entry], Sequence[Entry]],
    query: str,
    limit: int,
) -> list[Recalled]:
    """The two corpora's (word ranking, phrase ranking) as one list, best class first, each
    class by reciprocal rank (see the module docstring)."""
    q = Query.read(query)
    m_words, m_phrase = _ranks(*memories)
    e_words, e_phrase = _ranks(*entries)
    scored: dict[tuple[str, int], Recalled] = {}
    owner: dict[int, tuple[str, int]] = {}  # entry id -> the best memory taken from it
    texts: dict[int, str] = {}  # entry id -> its text, to explain the results kept
    for m in {m.id: m for ranking in memories for m in ranking}.values():
        match = why(m.text, q, phrase_hit=m.id in m_phrase, explain=False)
        score = _score(match, MEMORY_WEIGHT, m_phrase.get(m.id), m_words.get(m.id))
        scored[("memory", m.id)] = Recalled(
            "memory", m.id, m.session, m.first_seq, m.last_seq, m.entry_ids, m.kind, m.text,
            score, match=match, source=m.extractor,
        )  # fmt: skip
    for r in sorted(scored.values(), key=lambda r: (r.rank, -r.score)):
        for eid in r.entry_ids:
            owner.setdefault(eid, ("memory", r.id))
    for e in {e.id: e for ranking in entries for e in ranking}.values():
        texts[e.id] = e.message.text
        match = why(texts[e.id], q, phrase_hit=e.id in e_phrase, explain=False)
        score = _score(match, 1.0, e_phrase.get(e.id), e_words.get(e.id))
        key = owner.get(e.id)
        if key is None:
            scored[("entry", e.id)] = Recalled(
                "entry", e.id, e.session, e.seq, e.seq, (e.id,), e.role,
                _snippet(e.message.text, query), score, match=match,
            )  # fmt: skip
            continue
        found = scored[key]  # one result: the memory, in the better class of the two
        assert found.match is not None
        if match.rank < found.match.rank:
            found = replace(found, match=replace(match, entry=e.id))
        scored[key] = replace(found, score=found.score + score)
    ranked = sorted(
        scored.values(),
        key=lambda r: (r.rank, -r.score, r.kind == "memory", -(r.first_seq or 0), -r.id),
    )
    return [_explained(r, q, texts) for r in ranked[:limit]]


def _explained(r: Recalled, q: Query, texts: dict[int, str]) -> Recalled:
    """``r`` with its match's words and snippet, from the text that matched best."""
    assert r.match is not None
    hit = r.match.how == "phrase"  # the index's say-so, where the text alone may not show it
    source = r.match.entry
    if source is not None:
        text = texts[source]
    else:
        text = texts[r.id] if r.kind == "entry" else r.text
    return replace(r, match=replace(why(text, q, phrase_hit=hit), entry=source))


def _check_scope(
    ledger: LedgerBackend, tenant: str | None, agent: str | None, session: str | None
) -> tuple[str, str]:
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
    return tenant, agent


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
    ``session`` (the caller's, which must be theirs) matching the words of ``query``, exact
    matches first, each saying why it matched (see the module docstring)."""
    tenant, agent = _check_scope(ledger, tenant, agent, session)
    phrase = len(re.findall(r"\w+", query)) > 1  # one word is no phrase: its own match
    pool = max(limit, PHRASE_POOL)

    def both(search: Any, **kw: Any) -> tuple[list[Any], list[Any]]:
        words = [x for x, _ in search(tenant, agent, query, limit=limit, **kw)]
        if not phrase:
            return words, []
        return words, [x for x, _ in search(tenant, agent, query, limit=pool, phrase=True, **kw)]

    found_m = both(ledger.search_memories) if memories else ([], [])
    found_e = both(ledger.search_sessions, exclude=session) if sessions else ([], [])
    results = fuse(found_m, found_e, query, limit)
    infos: dict[str, SessionInfo | None] = {
        sid: ledger.session(Scope(tenant, agent, sid))
        for sid in {r.session for r in results if r.session is not None}
    }
    out = []
    for r in results:
        if r.session is None:  # a person's note: the agent's, in no session
            out.append(r)
            continue
        info = infos.get(r.session)
        if info is None:
            continue  # not this agent's after all: never shown
        out.append(replace(r, session_title=info.title, session_started=info.created_at))
    return out


def where_from(r: Recalled) -> str:
    """Where a result comes from, as a person reads it."""
    if r.session is None:
        who = r.source.partition(":")[2] or r.source
        return f"a note by {who}" if who else "a note"
    when = r.session_started[:10]
    title = f" {r.session_title!r}" if r.session_title else ""
    where = f"session {r.session[:8]}{title} of {when}, seq {r.first_seq}"
    return where + (f"..{r.last_seq}" if r.last_seq != r.first_seq else "")


def render_recalled(query: str, results: Sequence[Recalled]) -> str:
    """The results as the model (and ``comal memory search``) reads them: each with why it
    matched (``[exact]``, ``[phrase]``, ``[words: a, b]``) and the matched text marked «so».
    What comes from history (a fact, a snippet, a kind) is quoted on its result's line with
    every control, bidi and invisible character escaped (:func:`~comal.safe_text.one_line`):
    a hostile output read once can neither act on a terminal nor pose as another result line;
    its exact bytes are the entries named."""
    lines = [
        f"memory_search {query!r}: {len(results)} result(s) from this agent's memories and "
        "past sessions, exact matches first."
    ]
    for r in results:
        label = one_line(r.label)
        head = f"memory {r.id} ({label})" if r.kind == "memory" else f"{label} entry {r.id}"
        match = r.match
        if match is None:
            lines.append(f"- {head}, {where_from(r)}: {one_line(r.text)}")
            continue
        seen = f", in its entry {match.entry}" if match.entry is not None else ""
        lines.append(f"- [{one_line(match.label())}{seen}] {head}, {where_from(r)}: "
                     f"{match.snippet}")  # fmt: skip
    if not results:
        lines.append("Nothing matched; try other words or fewer of them.")
    else:
        lines.append(
            "Memories are facts taken from the entries named, or notes a person wrote: recall "
            "cues rather than proof; past sessions are not this session's evidence."
        )
    return "\n".join(lines)
