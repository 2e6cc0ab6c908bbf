"""Memories across sessions (MEM-1, MEM-2): facts saved before a summarization, each with the
entries it came from, found again by (tenant, agent) in any later session.

Two append-only tables, sealed like every row (``_rows.SEALED``):

- ``memory_flushes``: entries ``first_seq..last_seq`` of a session were read for facts before
  a stand-in compressed them (``why``: the stand-in's event kind; ``extractor``: who read them);
- ``memories``: one fact each (kind, text), naming its source entries, with its session's
  tenant and agent on the row, so one agent's memories are one index range.

:meth:`Memories.add_memories` keeps, inside its transaction and under the session's write lock
(PostgreSQL: the session row ``FOR UPDATE``; SQLite: the database's only write lock):

- a seq is flushed at most once: only the parts of the range no flush covers yet are flushed,
  and only facts whose sources lie wholly in one of them are stored (a replay, a second sweep,
  or two processes racing to compact one session remember a range once);
- a fact's sources are resolved here from their seqs to entry ids of that very session;
- a fact the agent already holds (the same text, by digest, in the same (tenant, agent)) is
  not stored again: it stays linked to where it was first seen. A forgotten memory still
  counts (its row stays, see ``_memory_notes``): a text a person forgot is not remembered
  again from later entries.

Called inside the caller's ``atomic()`` (the stand-in's transaction) it commits with it or not
at all. Search is scoped by (tenant, agent) and fails closed: an incomplete pair is a
:class:`~comal.errors.ScopeError`, never a search of everything; terms and results are capped
and each query runs under a time budget (:class:`MemorySearchTimeout` past it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..messages import canonical_json, load_json, sha256_hex
from ._memory_notes import MemoryCare, agent_pair, note_row_faults
from ._model import Entry, Fault, MemoryFlush, MemoryRecord, Scope
from ._rows import (
    COLUMNS,
    SEALED,
    body_matches,
    flush_from_row,
    memory_from_row,
    seal_matches,
    seal_row,
    whole,
)
from ._store import now
from ._text import check_int, check_text

__all__ = ["MAX_MEMORY_CHARS", "MAX_RESULTS", "MAX_TERMS", "Memories", "MemoryInput", "Remembered"]

MAX_TERMS = 16  # distinct words of a query searched; the rest are dropped
MAX_RESULTS = 50
MAX_MEMORY_CHARS = 2_000
MAX_KIND_CHARS = 40
MAX_SOURCES = 16  # entries one fact may name
SEARCH_BUDGET_S = 5.0


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """A fact to remember: ``kind``, ``text`` and the seqs of the entries it was taken from."""

    kind: str
    text: str
    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Remembered:
    """What one :meth:`~Memories.add_memories` stored: the flushes (none when the whole range
    was remembered before) and the new memories."""

    flushes: tuple[MemoryFlush, ...] = ()
    memories: tuple[MemoryRecord, ...] = ()


def search_terms(query: str) -> str | None:
    """An FTS5 query matching any of the first :data:`MAX_TERMS` distinct words of ``query``
    (a question must not need every word), or None when it has none."""
    found = list(dict.fromkeys(re.findall(r"\w+", query.lower())))[:MAX_TERMS]
    return " OR ".join(f'"{w}"' for w in found) if found else None


def phrase_terms(query: str) -> str | None:
    """An FTS5 query matching the first :data:`MAX_TERMS` words of ``query`` side by side, in
    their order (a phrase: ``hello.txt`` is the words ``hello txt``), or None without words."""
    found = re.findall(r"\w+", query.lower())[:MAX_TERMS]
    return '"' + " ".join(found) + '"' if found else None


def gaps(first: int, last: int, covered: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs of ``first..last`` that none of the ``covered`` ranges (by start) contains."""
    out: list[tuple[int, int]] = []
    at = first
    for a, b in sorted(covered):
        if b < at:
            continue
        if a > last:
            break
        if a > at:
            out.append((at, a - 1))
        at = max(at, b + 1)
    if at <= last:
        out.append((at, last))
    return out


def _check_fact(fact: MemoryInput) -> None:
    if not isinstance(fact, MemoryInput):
        raise UserError(f"a memory is a MemoryInput, not {type(fact).__name__}")
    problems = []
    if not fact.kind or len(fact.kind) > MAX_KIND_CHARS:
        problems.append(f"kind must be 1..{MAX_KIND_CHARS} characters")
    if not fact.text.strip() or len(fact.text) > MAX_MEMORY_CHARS:
        problems.append(f"text must be 1..{MAX_MEMORY_CHARS} characters")
    if not 0 < len(fact.seqs) <= MAX_SOURCES or not all(whole(s) for s in fact.seqs):
        problems.append(f"seqs must name 1..{MAX_SOURCES} entries")
    if problems:
        raise UserError(f"bad memory {fact.text[:60]!r}: " + "; ".join(problems))
    check_text(kind=fact.kind, text=fact.text)


class Memories(MemoryCare):
    """Flushes and memories: writes under the rules above, reads, search, verify."""

    def memory_gaps(self, scope: Scope, first_seq: int, last_seq: int) -> list[tuple[int, int]]:
        """The runs of ``first_seq..last_seq`` (clamped to the session's entries) that no
        flush covers yet: what remembering that range would read. Nothing for a scope that
        does not resolve."""
        check_int(first_seq=first_seq, last_seq=last_seq)
        with self._reading() as c:
            row = self._session_row(scope)
            if row is None:
                return []
            return self._gaps(c, scope, first_seq, min(last_seq, int(row[0]) - 1))

    def _gaps(self, c: Any, scope: Scope, first: int, last: int) -> list[tuple[int, int]]:
        if last < first:
            return []
        covered = c.execute(
            "SELECT first_seq, last_seq FROM memory_flushes WHERE session_id = ?"
            " AND last_seq >= ? AND first_seq <= ? ORDER BY first_seq",
            (scope.session, first, last),
        ).fetchall()
        return gaps(first, last, [(int(a), int(b)) for a, b in covered])

    def add_memories(
        self,
        scope: Scope,
        first_seq: int,
        last_seq: int,
        facts: Sequence[MemoryInput],
        *,
        why: str,
        extractor: str,
    ) -> Remembered:
        """Flush what of ``first_seq..last_seq`` is not flushed yet, storing ``facts`` whose
        sources lie in it (see the module docstring); one transaction, nested in the caller's."""
        check_int(first_seq=first_seq, last_seq=last_seq)
        for fact in facts:
            _check_fact(fact)
        if not why or not extractor:
            raise UserError("a flush names why it was made and who extracted its facts")
        check_text(why=why, extractor=extractor)
        created = now()
        flushes: list[MemoryFlush] = []
        stored: list[MemoryRecord] = []
        with self.atomic() as c:
            row = self._session_row(scope, lock=True)
            if row is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            end = int(row[0]) - 1
            if not 0 <= first_seq <= last_seq <= end:
                raise UserError(
                    f"memory range {first_seq}..{last_seq} is outside the session's entries "
                    f"0..{end}"
                )
            runs = self._gaps(c, scope, first_seq, last_seq)
            if not runs:
                return Remembered()
            held = self._held(c, scope, {sha256_hex(f.text) for f in facts})
            for a, b in runs:
                ids = dict(
                    c.execute(
                        f"SELECT seq, id FROM entries{self._dialect.budget_index}"
                        " WHERE session_id = ? AND seq BETWEEN ? AND ?",
                        (scope.session, a, b),
                    ).fetchall()
                )
                mine = [f for f in facts if all(a <= s <= b for s in f.seqs)]
                fresh: list[MemoryInput] = []
                for f in mine:
                    digest = sha256_hex(f.text)
                    if digest not in held:
                        held.add(digest)
                        fresh.append(f)
                sealed: tuple[Any, ...] = (scope.session, a, b, why, extractor, len(fresh))
                sealed += (created,)
                (fid,) = self._dialect.new_ids(c, "memory_flushes", 1)
                c.execute(
                    f"INSERT INTO memory_flushes (id, {', '.join(SEALED['memory_flushes'])},"
                    f" seal){self._dialect.overriding}"
                    f" VALUES ({', '.join('?' * (len(sealed) + 2))})",
                    (fid, *sealed, seal_row(self._sealer, "memory_flushes", sealed, fid)),
                )
                flushes.append(
                    MemoryFlush(fid, scope.session, a, b, why, extractor, len(fresh), created)
                )
                mids = self._dialect.new_ids(c, "memories", len(fresh)) if fresh else []
                for f, mid in zip(fresh, mids, strict=True):
                    stored.append(self._insert(c, scope, f, ids, extractor, created, mid))
            self._dialect.index_text(
                c, "memories_fts", scope.session, [(m.id, m.text) for m in stored]
            )
        return Remembered(tuple(flushes), tuple(stored))

    def _held(self, c: Any, scope: Scope, digests: set[str]) -> set[str]:
        """Which of ``digests`` the agent already remembers."""
        found: set[str] = set()
        ordered = sorted(digests)
        for k in range(0, len(ordered), 500):
            chunk = ordered[k : k + 500]
            rows = c.execute(
                "SELECT digest FROM memories WHERE tenant = ? AND agent = ?"
                f" AND digest IN ({', '.join('?' * len(chunk))})",
                (scope.tenant, scope.agent, *chunk),
            ).fetchall()
            found |= {str(r[0]) for r in rows}
        return found

    def _insert(
        self,
        c: Any,
        scope: Scope,
        fact: MemoryInput,
        ids: dict[int, int],
        extractor: str,
        created: str,
        mid: int,
    ) -> MemoryRecord:
        seqs = sorted(set(fact.seqs))
        entry_ids = tuple(int(ids[s]) for s in seqs)
        digest = sha256_hex(fact.text)
        sealed: tuple[Any, ...] = (scope.session, scope.tenant, scope.agent, seqs[0], seqs[-1])
        sealed += (canonical_json(list(entry_ids)), fact.kind, extractor, digest, created)
        c.execute(
            f"INSERT INTO memories (id, {', '.join(SEALED['memories'])}, seal, body)"
            f"{self._dialect.overriding} VALUES ({', '.join('?' * (len(sealed) + 3))})",
            (mid, *sealed, seal_row(self._sealer, "memories", sealed, mid), fact.text),
        )
        return MemoryRecord(
            mid, scope.tenant, scope.agent, scope.session, seqs[0], seqs[-1], entry_ids,
            fact.kind, fact.text, extractor, digest, created,
        )  # fmt: skip

    # -- reads ------------------------------------------------------------------------------
    def memories(self, scope: Scope) -> list[MemoryRecord]:
        """The session's memories, by the seq they start at."""
        rows = self._select(
            "memories", "session_id = ?", (scope.session,), "first_seq, id", scope=scope
        )
        return [memory_from_row(self._sealer, r) for r in rows]

    def memory_flushes(self, scope: Scope) -> list[MemoryFlush]:
        """The session's flushes, oldest range first."""
        rows = self._select(
            "memory_flushes", "session_id = ?", (scope.session,), "first_seq", scope=scope
        )
        return [flush_from_row(self._sealer, r) for r in rows]

    def _by_ids(self, table: str, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        with self._reading() as c:
            return list(
                c.execute(
                    f"SELECT {COLUMNS[table]} FROM {table} WHERE id IN ({marks})", tuple(ids)
                ).fetchall()
            )

    # -- search (MEM-2) ---------------------------------------------------------------------
    def search_memories(
        self, tenant: str, agent: str, query: str, *, limit: int = 10,
        budget_s: float = SEARCH_BUDGET_S, phrase: bool = False,
    ) -> list[tuple[MemoryRecord, float]]:  # fmt: skip
        """The memories of (``tenant``, ``agent``), from every session and a person's notes,
        matching any of the words of ``query`` (``phrase``: all of them side by side, in
        order), best first with their scores (BM25 on SQLite, ``ts_rank`` on PostgreSQL: the
        ledger's full-text ranking). A forgotten memory is never among them."""
        tenant, agent = agent_pair(tenant, agent)
        match = self._match(query, limit, phrase)
        if match is None:
            return []
        with self._reading() as c:
            ranked = self._dialect.ranked_agent(
                c, "memories_fts", tenant, agent, match, limit, exclude=None, budget_s=budget_s
            )
        rows = {int(r[11]): r for r in self._by_ids("memories", [i for i, _ in ranked])}
        out = []
        for mid, score in ranked:
            r = rows.get(mid)
            if r is not None and (r[1], r[2]) == (tenant, agent):  # the index agrees with the row
                out.append((memory_from_row(self._sealer, r), score))
        return out

    def search_sessions(
        self, tenant: str, agent: str, query: str, *, limit: int = 10,
        exclude: str | None = None, budget_s: float = SEARCH_BUDGET_S, phrase: bool = False,
    ) -> list[tuple[Entry, float]]:  # fmt: skip
        """The entries of (``tenant``, ``agent``)'s sessions but ``exclude`` matching any of
        the words of ``query`` (``phrase``: all of them side by side, in order), best first
        with their scores."""
        tenant, agent = agent_pair(tenant, agent)
        match = self._match(query, limit, phrase)
        if match is None:
            return []
        with self._reading() as c:
            ranked = self._dialect.ranked_agent(
                c, "entries_fts", tenant, agent, match, limit, exclude=exclude, budget_s=budget_s
            )
            found = self._load([i for i, _ in ranked])
            ids = sorted({e.session for e in found.values()})
            owners: dict[str, tuple[str, str]] = {}
            if ids:
                marks = ", ".join("?" * len(ids))
                rows = c.execute(
                    f"SELECT id, tenant, agent FROM sessions WHERE id IN ({marks})", tuple(ids)
                ).fetchall()
                owners = {r[0]: (r[1], r[2]) for r in rows}
        out = []
        for eid, score in ranked:
            e = found.get(eid)
            if e is not None and e.session != exclude and owners.get(e.session) == (tenant, agent):
                out.append((e, score))
        return out

    def _match(self, query: str, limit: int, phrase: bool) -> str | None:
        check_int(limit=limit)
        if not 1 <= limit <= MAX_RESULTS:
            raise UserError(f"limit must be 1..{MAX_RESULTS}, not {limit}")
        if not isinstance(query, str):
            raise UserError(f"a search query is text, not {type(query).__name__}")
        return phrase_terms(query) if phrase else search_terms(query)

    # -- verify -----------------------------------------------------------------------------
    def memory_faults(self) -> list[Fault]:
        """``verify``'s part for memories: each flush and memory matches its seal (and a memory
        its digest), a flush lies within its session's entries and overlaps no other, and a
        memory has its session's tenant and agent and names entries of that session inside
        one of its flushes."""
        faults: list[Fault] = []
        with self._reading() as c:
            sessions = {
                r[0]: (r[1], r[2], r[3])
                for r in c.execute("SELECT id, tenant, agent, next_seq FROM sessions").fetchall()
            }
            flushes = c.execute(
                f"SELECT {COLUMNS['memory_flushes']} FROM memory_flushes"
                " ORDER BY session_id, first_seq"
            ).fetchall()
        ranges: dict[str, list[tuple[int, int]]] = {}
        for r in flushes:
            sid, row = r[0], r[8]

            def fault(kind: str, detail: str, sid: Any = sid, row: Any = row) -> None:
                faults.append(Fault(sid, None, kind, detail, "memory_flushes", row))

            if not seal_matches(self._sealer, "memory_flushes", r):
                fault("seal", "row does not match its seal")
                continue
            first, last = int(r[1]), int(r[2])
            known = ranges.setdefault(sid, [])
            if sid not in sessions:
                fault("no-session", "a flush of a session that is not stored")
            elif not 0 <= first <= last < int(sessions[sid][2]):
                fault("range", f"range {first}..{last} is outside the session's entries")
            if known and first <= known[-1][1]:
                fault("memory-overlap", f"range {first}..{last} was flushed before")
            known.append((first, last))
        for page in self._memory_pages():
            owners = self._entry_owners(page)
            for r in page:
                if r[0] is None:  # a person's note (DRV-7)
                    faults += note_row_faults(self, r)
                else:
                    faults += _memory_row_faults(self, r, sessions, ranges, owners)
        return faults + self.forget_faults()

    def _memory_pages(self) -> Any:
        return self._id_pages("memories", 11)

    def _entry_owners(self, rows: Sequence[tuple[Any, ...]]) -> dict[int, tuple[str, int]]:
        ids: set[int] = set()
        for r in rows:
            try:
                value = load_json(r[5])
            except Exception:  # reported by the row's own check
                continue
            if isinstance(value, list):
                ids |= {int(i) for i in value if whole(i)}
        found: dict[int, tuple[str, int]] = {}
        ordered = sorted(ids)
        with self._reading() as c:
            for k in range(0, len(ordered), 500):
                chunk = ordered[k : k + 500]
                marks = ", ".join("?" * len(chunk))
                for eid, sid, seq in c.execute(
                    f"SELECT id, session_id, seq FROM entries WHERE id IN ({marks})", tuple(chunk)
                ).fetchall():
                    found[int(eid)] = (sid, int(seq))
        return found


def _memory_row_faults(
    store: Memories,
    r: tuple[Any, ...],
    sessions: dict[str, tuple[str, str, int]],
    ranges: dict[str, list[tuple[int, int]]],
    owners: dict[int, tuple[str, int]],
) -> list[Fault]:
    sid, row = r[0], r[11]
    out: list[Fault] = []

    def fault(kind: str, detail: str) -> None:
        out.append(Fault(sid, None, kind, f"memory {row} {detail}", "memories", row))

    if not seal_matches(store._sealer, "memories", r):
        fault("seal", "does not match its seal")
        return out
    if not body_matches(r[12], r[8]):
        fault("digest", "body does not match its sha256 digest")
    owner = sessions.get(sid)
    if owner is None:
        fault("no-session", "belongs to a session that is not stored")
        return out
    if (r[1], r[2]) != owner[:2]:
        fault("memory-scope", f"says tenant/agent {r[1]!r}/{r[2]!r}, its session's differ")
    first, last = int(r[3]), int(r[4])
    if not any(a <= first and last <= b for a, b in ranges.get(sid, [])):
        fault("memory-range", f"seq {first}..{last} lies in no flush of its session")
    try:
        ids = load_json(r[5])
    except Exception as exc:
        fault("decode", f"entry_ids do not decode: {exc}")
        return out
    where = [owners.get(int(i)) if whole(i) else None for i in ids] if isinstance(ids, list) else []
    if not where or any(w is None or w[0] != sid or not first <= w[1] <= last for w in where):
        fault("memory-sources", "names entries that are not its session's within its range")
    return out
