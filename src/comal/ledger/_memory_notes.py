"""Memory a person manages (DRV-7): notes written by a person, forgets, and one agent's memories
page by page.

- A **note** is a memory of (tenant, agent) that a person wrote: a row of ``memories`` with
  kind ``note``, the person as its ``extractor`` (``user:ana``) and no session, seqs or
  entries, sealed and indexed like every memory, so ``memory_search`` finds it from any
  session of that agent. A note whose text the agent already holds (and has not forgotten) is
  not stored twice: the memory that holds it is returned instead.
- A **forget** is a row of ``memory_forgets`` (who, when, why, and the digest of what was
  forgotten), one per memory; the memory's row stays (the ledger is append-only). Search
  (``ranked_agent``), listing and ``memory_search`` leave a forgotten memory out by its id.
  The extractor's rule that a fact the agent holds is not stored again
  (:meth:`~comal.ledger._memories.Memories.add_memories`) counts forgotten memories too, so a
  forgotten text is not remembered again when it turns up later in other entries of the same
  agent: only a person's note brings it back.
- :meth:`MemoryCare.agent_memories` pages an agent's memories newest first over the index
  ``memories_agent (tenant, agent, id)``: a page costs its own rows, not the agent's history.

Every call names its (tenant, agent) and fails closed like the search (LED-2): a memory id of
another agent is :class:`~comal.ledger.MemoryNotFound`, exactly as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ScopeError, UserError
from ..messages import sha256_hex
from ._errors import MemoryNotFound
from ._model import Fault, MemoryForget, MemoryRecord
from ._reads import Reads
from ._rows import (
    COLUMNS,
    SEALED,
    body_matches,
    forget_from_row,
    memory_from_row,
    seal_matches,
    seal_row,
)
from ._store import now
from ._text import check_int, check_text, storable

__all__ = [
    "LIVE",
    "MAX_NOTE_CHARS",
    "MAX_PAGE",
    "NOTE",
    "MemoryCare",
    "agent_pair",
    "note_row_faults",
]

NOTE = "note"
MAX_NOTE_CHARS = 2_000  # the memories' own bound (MAX_MEMORY_CHARS)
MAX_PAGE = 200
MAX_BY_CHARS = 200
MAX_WHY_CHARS = 2_000
# A memory that is not forgotten: ``m`` is the memory's alias in the query.
LIVE = "NOT EXISTS (SELECT 1 FROM memory_forgets x WHERE x.memory_id = m.id)"
_MEMORY_COLS = ", ".join(f"m.{c}" for c in COLUMNS["memories"].split(", "))


def agent_pair(tenant: object, agent: object) -> tuple[str, str]:
    """(tenant, agent) when both are given and storable; else the coded refusal (LED-2)."""
    given = (("tenant", tenant), ("agent", agent))
    missing = [n for n, v in given if not isinstance(v, str) or not v]
    if missing:
        raise ScopeError(
            f"memory search needs a tenant and an agent; {' and '.join(missing)} missing: it "
            "never searches every agent's memories (give --session, or --tenant and --agent)"
        )
    assert isinstance(tenant, str) and isinstance(agent, str)
    if not (storable(tenant) and storable(agent)):
        raise ScopeError("tenant or agent holds NUL or a lone surrogate; no agent has such a name")
    return tenant, agent


def _person(name: str, value: object, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()) or len(value) > limit:
        what = "0" if empty else "1"
        raise UserError(f"{name} must be text of {what}..{limit} characters, not {value!r}")
    check_text(**{name: value})
    return value


class MemoryCare(Reads):
    """Notes, forgets and pages of one agent's memories (see the module docstring)."""

    def add_note(self, tenant: str, agent: str, text: str, *, by: str) -> tuple[MemoryRecord, bool]:
        """Remember ``text`` for (``tenant``, ``agent``) as a note ``by`` a person (stored as
        the memory's extractor). Returns the memory and whether it is new: a text the agent
        holds already (not forgotten) returns the memory that holds it, and nothing is
        written."""
        tenant, agent = agent_pair(tenant, agent)
        if not isinstance(text, str):
            raise UserError(f"a note is text, not {type(text).__name__}")
        text = text.strip()
        if not text or len(text) > MAX_NOTE_CHARS:
            raise UserError(
                f"a note must be 1..{MAX_NOTE_CHARS} characters (it has {len(text)}); say the "
                "fact in fewer words"
            )
        check_text(text=text)
        by = _person("by", by, MAX_BY_CHARS)
        digest = sha256_hex(text)
        with self.atomic() as c:
            # Two people adding one text at once store it once (PostgreSQL; SQLite's writer
            # holds the only write lock already).
            self._dialect.exclusive(c, f"memory-note\x00{tenant}\x00{agent}")
            held = c.execute(
                f"SELECT {_MEMORY_COLS} FROM memories m WHERE m.tenant = ? AND m.agent = ?"
                f" AND m.digest = ? AND {LIVE} ORDER BY m.id LIMIT 1",
                (tenant, agent, digest),
            ).fetchone()
            if held is not None:
                return memory_from_row(self._sealer, held), False
            created = now()
            sealed: tuple[Any, ...] = (None, tenant, agent, None, None, "[]", NOTE, by, digest)
            sealed += (created,)
            (memory_id,) = self._dialect.new_ids(c, "memories", 1)
            c.execute(
                f"INSERT INTO memories (id, {', '.join(SEALED['memories'])}, seal, body)"
                f"{self._dialect.overriding} VALUES ({', '.join('?' * (len(sealed) + 3))})",
                (memory_id, *sealed, seal_row(self._sealer, "memories", sealed, memory_id), text),
            )
            # A note's index rows name no session ("" is no session's id).
            self._dialect.index_text(c, "memories_fts", "", [(memory_id, text)])
        record = MemoryRecord(
            memory_id, tenant, agent, None, None, None, (), NOTE, text, by, digest, created
        )
        return record, True

    def forget_memory(
        self, tenant: str, agent: str, memory_id: int, *, by: str, why: str = ""
    ) -> tuple[MemoryForget, bool]:
        """Record that ``by`` forgot memory ``memory_id`` of (``tenant``, ``agent``), and
        ``why``. Returns the forget and whether it is new: a memory forgotten before returns
        the first forget, and nothing is written. An id the agent does not hold is
        :class:`~comal.ledger.MemoryNotFound`."""
        tenant, agent = agent_pair(tenant, agent)
        check_int(memory_id=memory_id)
        by = _person("by", by, MAX_BY_CHARS)
        why = _person("why", why, MAX_WHY_CHARS, empty=True).strip()
        with self.atomic() as c:
            self._dialect.exclusive(c, f"memory-forget\x00{memory_id}")
            row = c.execute(
                f"SELECT {COLUMNS['memories']} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None or (row[1], row[2]) != (tenant, agent):
                raise MemoryNotFound(
                    f"agent {agent!r} of tenant {tenant!r} holds no memory {memory_id}; nothing "
                    "was forgotten (`comal memory list` shows its memories and their ids)"
                )
            memory = memory_from_row(self._sealer, row)  # a damaged row is refused here
            done = self._forgets(c, [memory_id])
            if memory_id in done:
                return done[memory_id], False
            created = now()
            sealed: tuple[Any, ...] = (memory.session, memory_id, tenant, agent, memory.digest)
            sealed += (by, why, created)
            (fid,) = self._dialect.new_ids(c, "memory_forgets", 1)
            c.execute(
                f"INSERT INTO memory_forgets (id, {', '.join(SEALED['memory_forgets'])}, seal)"
                f"{self._dialect.overriding} VALUES ({', '.join('?' * (len(sealed) + 2))})",
                (fid, *sealed, seal_row(self._sealer, "memory_forgets", sealed, fid)),
            )
        forget = MemoryForget(
            fid, memory_id, tenant, agent, memory.session, memory.digest, by, why, created
        )
        return forget, True

    def agent_memories(
        self,
        tenant: str,
        agent: str,
        *,
        before: int | None = None,
        limit: int = 20,
        forgotten: bool = False,
    ) -> list[tuple[MemoryRecord, MemoryForget | None]]:
        """A page of the memories of (``tenant``, ``agent``), newest first, each with its
        forget: those with ids below ``before`` (None: the newest), at most ``limit``;
        forgotten ones only when ``forgotten``."""
        tenant, agent = agent_pair(tenant, agent)
        check_int(before=before, limit=limit)
        if not 1 <= limit <= MAX_PAGE:
            raise UserError(f"limit must be 1..{MAX_PAGE}, not {limit}")
        where = "m.tenant = ? AND m.agent = ?"
        args: list[Any] = [tenant, agent]
        if before is not None:
            where += " AND m.id < ?"
            args.append(before)
        if not forgotten:
            where += f" AND {LIVE}"
        with self._reading() as c:
            rows = c.execute(
                f"SELECT {_MEMORY_COLS} FROM memories m WHERE {where} ORDER BY m.id DESC"
                f" LIMIT {int(limit)}",
                tuple(args),
            ).fetchall()
            done = self._forgets(c, [int(r[11]) for r in rows]) if forgotten else {}
        return [(memory_from_row(self._sealer, r), done.get(int(r[11]))) for r in rows]

    def _forgets(self, c: Any, ids: Sequence[int]) -> dict[int, MemoryForget]:
        found: dict[int, MemoryForget] = {}
        for k in range(0, len(ids), 500):
            chunk = list(ids[k : k + 500])
            if not chunk:
                continue
            for r in c.execute(
                f"SELECT {COLUMNS['memory_forgets']} FROM memory_forgets"
                f" WHERE memory_id IN ({', '.join('?' * len(chunk))})",
                tuple(chunk),
            ).fetchall():
                forget = forget_from_row(self._sealer, r)
                found[forget.memory] = forget
        return found

    # -- verify -----------------------------------------------------------------------------
    def forget_faults(self) -> list[Fault]:
        """``verify``'s part for forgets: each matches its seal and names a memory of its
        tenant, agent and session whose text has the digest it recorded."""
        faults: list[Fault] = []
        for page in self._forget_pages():
            with self._reading() as c, self._lenient():
                ids = sorted({int(r[1]) for r in page if isinstance(r[1], int)})
                memories = {
                    int(r[0]): r[1:]
                    for k in range(0, len(ids), 500)
                    for r in c.execute(
                        "SELECT id, session_id, tenant, agent, digest FROM memories WHERE id IN"
                        f" ({', '.join('?' * len(ids[k : k + 500]))})",
                        tuple(ids[k : k + 500]),
                    ).fetchall()
                }
            for r in page:

                def fault(kind: str, detail: str, r: Any = r) -> None:
                    faults.append(Fault(r[0], None, kind, f"forget {r[9]} {detail}",
                                        "memory_forgets", r[9]))  # fmt: skip

                if not seal_matches(self._sealer, "memory_forgets", r):
                    fault("seal", "does not match its seal")
                elif r[1] not in memories:
                    fault("forget-memory", f"names memory {r[1]}, which is not stored")
                elif tuple(memories[r[1]]) != (r[0], r[2], r[3], r[4]):
                    fault("forget-memory", f"does not match memory {r[1]}'s agent or text")
        return faults

    def _forget_pages(self) -> Iterator[list[tuple[Any, ...]]]:
        return self._id_pages("memory_forgets", 9)

    def _id_pages(self, table: str, id_at: int) -> Iterator[list[tuple[Any, ...]]]:
        """``table``'s rows (its sealed columns) in pages of 500 by id, one read each, so a
        check of a large store holds no long read; ``id_at`` is the id's place in a row."""
        after = -1
        while True:
            with self._reading() as c, self._lenient():
                rows = c.execute(
                    f"SELECT {COLUMNS[table]} FROM {table} WHERE id > ? ORDER BY id LIMIT 500",
                    (after,),
                ).fetchall()
            if rows:
                yield rows
            if len(rows) < 500:
                return
            after = int(rows[-1][id_at])


def note_row_faults(store: Reads, r: Sequence[Any]) -> list[Fault]:
    """``verify``'s part for a memory row without a session: it must be a sound note."""
    row = r[11]
    out: list[Fault] = []

    def fault(kind: str, detail: str) -> None:
        out.append(Fault(None, None, kind, f"memory {row} {detail}", "memories", row))

    if not seal_matches(store._sealer, "memories", r):
        fault("seal", "does not match its seal")
        return out
    if not body_matches(r[12], r[8]):
        fault("digest", "body does not match its sha256 digest")
    if r[6] != NOTE or r[3] is not None or r[4] is not None or r[5] != "[]":
        fault("memory-note", "has no session, yet is not a person's note (kind note, no entries)")
    return out
