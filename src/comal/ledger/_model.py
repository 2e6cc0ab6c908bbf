"""Values the ledger hands out: scopes, sessions, entries, and the records beside them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ScopeError
from ..messages import Message

log = logging.getLogger("comal.ledger")

STATUSES = ("active", "finished")

# Receipts (OPS-3), summaries (DAG), events (OBS-2) and durable write preparations (RES-3) share
# one table: a kind, a canonical JSON body and its digest.
RecordTable = Literal["receipt", "summary", "event", "preparation"]
RECORD_TABLES: tuple[RecordTable, ...] = ("receipt", "summary", "event", "preparation")


@dataclass(frozen=True, slots=True)
class Scope:
    """(tenant, agent, session): every read and write names all three (LED-2)."""

    tenant: str
    agent: str
    session: str

    def __post_init__(self) -> None:
        missing = [n for n in ("tenant", "agent", "session") if not getattr(self, n)]
        if missing:
            raise ScopeError(
                f"incomplete ledger scope: {', '.join(missing)} missing; "
                "pass tenant, agent and session (reads fail closed without them)"
            )


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    tenant: str
    agent: str
    parent: str | None
    status: str
    title: str | None
    source: str | None
    created_at: str
    entries: int
    tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    # Running totals of the session's request log (CCH-2): requests recorded, and the dollars
    # prompt caching saved against no caching where known (None: no request's saving is known).
    requests: int = 0
    saved_usd: float | None = None

    @property
    def scope(self) -> Scope:
        return Scope(self.tenant, self.agent, self.id)

    @property
    def workspace(self) -> str | None:
        """The directory the session's tools worked in (``meta["workspace"]``), if recorded.

        The agent stores it when it creates a session; ``--resume`` must use it (RES-6).
        """
        value = self.meta.get("workspace")
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class SessionPage:
    """One page of the session listing, newest first: ``sessions`` from ``offset`` on, and
    ``total``, every session the filters match (so a surface can say how many it left out)."""

    sessions: list[SessionInfo]
    total: int
    offset: int = 0

    @property
    def remaining(self) -> int:
        """Sessions after this page."""
        return max(0, self.total - self.offset - len(self.sessions))


@dataclass(frozen=True, slots=True)
class EntryHead:
    """The small columns of an entry: enough to budget without reading bodies."""

    id: int
    seq: int
    step: int
    role: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored message. ``step`` is the ``seq`` of the first entry of its step; ``digest`` is
    the sha256 of the canonical body, ``output_digest`` that of a tool result's exact text."""

    id: int
    session: str
    seq: int
    step: int
    role: str
    tokens: int
    size: int
    created_at: str
    digest: str
    output_digest: str | None
    message: Message


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Usage measured for one model call, anchored to the entry it produced (TOK-2)."""

    id: int
    session: str
    entry_id: int | None
    model: str | None
    protocol: str | None
    new_input: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    reasoning: int | None
    meta: dict[str, Any]
    created_at: str = ""
    tokens: int = 0  # billed: new input + cache reads and writes + output (unknown adds 0)


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    id: int
    session: str
    first_seq: int
    last_seq: int
    tokens: int
    digest: str
    created_at: str
    message: Message
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A summary node of the dag engine's lossless DAG (DAG-1, DAG-2).

    A leaf (``depth`` 0) stands for the whole steps ``first_seq..last_seq``; a condensed one
    for its ``children`` (summary ids, oldest first), whose union is the same kind of range.
    ``descendant_count`` / ``descendant_tokens`` count the entries beneath it; ``time_range``
    is the ISO times of its first and last source entry; ``summarizer`` names what made it
    (``provider:model``, ``extractive`` or ``count-only``) and ``level`` the escalation level
    (``normal``, ``aggressive``, ``count-only``). Headers shown to a model come from these
    fields, never from ``text`` (DAG-6). ``digest`` is the sha256 of ``text``;
    ``sources_digest`` the sha256 of the rendered sources it was made from (what ``ctx_expand``
    returns), so both the body and its coverage can be re-checked (``verify``).
    """

    id: int
    session: str
    depth: int
    kind: str
    first_seq: int
    last_seq: int
    children: tuple[int, ...]
    descendant_count: int
    descendant_tokens: int
    time_range: tuple[str, str]
    tokens: int
    summarizer: str
    level: str
    digest: str
    created_at: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    sources_digest: str = ""


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One remembered fact (MEM-1): ``text`` of ``kind`` (name, date, preference, decision,
    path, identifier, command, or a model's own), taken from the entries ``entry_ids`` (seq
    ``first_seq..last_seq`` of ``session``) by ``extractor`` (``extractive`` or
    ``provider:model``) before they were summarized. ``digest`` is the sha256 of ``text``.

    A person's note (DRV-7) is a memory of the agent that no session holds: ``kind``
    ``note``, ``extractor`` the person (``user:ana``), no session, seqs or entries."""

    id: int
    tenant: str
    agent: str
    session: str | None
    first_seq: int | None
    last_seq: int | None
    entry_ids: tuple[int, ...]
    kind: str
    text: str
    extractor: str
    digest: str
    created_at: str


@dataclass(frozen=True, slots=True)
class MemoryForget:
    """That memory ``memory`` (whose text had ``digest``) of (``tenant``, ``agent``) was
    forgotten by ``by`` at ``created_at``, and ``why`` (DRV-7). The memory's row stays: the
    ledger is append-only, and search and listing leave a forgotten memory out."""

    id: int
    memory: int
    tenant: str
    agent: str
    session: str | None
    digest: str
    by: str
    why: str
    created_at: str


@dataclass(frozen=True, slots=True)
class MemoryFlush:
    """That entries ``first_seq..last_seq`` of ``session`` were read for facts, once, before
    the stand-in ``why`` names compressed them; ``facts`` memories were stored from them."""

    id: int
    session: str
    first_seq: int
    last_seq: int
    why: str
    extractor: str
    facts: int
    created_at: str


@dataclass(frozen=True, slots=True)
class Record:
    """A receipt, summary or event: a JSON body with a kind, a digest and a time."""

    id: int
    session: str
    kind: str
    created_at: str
    digest: str
    body: dict[str, Any]
    table: str = ""  # receipt, summary, event or preparation


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One entry a search found: ``offsets`` where each match starts in the entry's text,
    ``marks`` the (start, end) of each match the ``snippet`` shows, in the snippet's own
    characters."""

    entry_id: int
    seq: int
    role: str
    snippet: str
    offsets: tuple[int, ...] = ()
    marks: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Deletion:
    """The tombstone :meth:`delete_session` leaves: who removed which session, when, and a
    digest of everything removed (``rows`` counts them per table)."""

    id: int
    session: str
    tenant: str
    agent: str
    parent: str | None
    title: str | None
    created_at: str  # the session's own start
    deleted_at: str
    deleted_by: str | None
    entries: int
    tokens: int
    rows: dict[str, int]
    digest: str  # sha256 of the canonical JSON of the removed rows' digests and seals


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """Something that happened to the ledger as a whole (not to one session): a restore
    accepted on purpose (``restore_accepted``: what was found, what this machine had seen, by
    whom)."""

    id: int
    kind: str
    created_at: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Fault:
    """One thing wrong: in which session (None: the database as a whole), table and row (id),
    at which seq (entries), of what kind, and the detail."""

    session: str | None
    seq: int | None
    kind: str
    detail: str
    table: str = "entries"
    row: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "table": self.table,
            "row": self.row,
            "seq": self.seq,
            "kind": self.kind,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """``ok`` when nothing is wrong. ``rows`` counts what was checked per table; ``database``
    says what the database's own check found (``ok``, ``faults`` or ``not checked: why``),
    ``sealing`` how the seals were checked (keyed, and the secret's source) or why not."""

    ok: bool
    entries: int
    faults: tuple[Fault, ...]
    paused: tuple[str, ...] = ()  # sessions ending in open tool calls (not a fault)
    rows: dict[str, int] = field(default_factory=dict)
    database: str = "not checked"
    sealing: str = "not checked"  # keyed under the ledger's secret, or why seals were not checked

    def as_dict(self, *, checks: bool = False) -> dict[str, Any]:
        """``checks`` adds what was checked: ``rows`` per table and the ``database`` status."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "entries": self.entries,
            "faults": [f.as_dict() for f in self.faults],
            "paused": list(self.paused),
        }
        if checks:
            out |= {"rows": dict(self.rows), "database": self.database, "sealing": self.sealing}
        return out
