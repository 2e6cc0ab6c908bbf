"""``verify``: everything stored is what was written, and every session is whole.

Checked, table by table, each fault naming session, table, row (id), seq and what is wrong:

- the database's own integrity check first (SQLite ``integrity_check`` and each full-text
  index's check; PostgreSQL ``amcheck`` where installed, else "not checked" and why);
- the secret first of all: without the ledger's own, no seal can be checked, and that is a
  ``secret`` fault (table ``ledger``) saying where it looked, never a pass;
- ``sessions``: each row against its seal; its chain head (``next_seq``, ``head``) against
  ``head_seal`` and the last entry's seal; its counters (``next_seq``, ``entry_count``,
  ``token_total``, ``last_step``) against the entries actually stored, so a truncated tail shows;
- ``entries``: body digest, canonical form, seal, role, size, call id and output digest; dense
  sequences; the chain (each ``prev_seal`` is the seal of the entry before it, so a removed,
  moved or inserted entry breaks it); every step whole (a session ending in unanswered calls is
  *paused*, not damaged);
- ``requests``: seal, the facts derived from meta, the entry each names;
- ``checkpoints`` and ``records``: body digest, decoding, canonical form, seal, ranges;
- ``deletions``: each tombstone against its seal;
- ``memory_flushes`` and ``memories``: seals and digests, each flush within its session's
  entries and overlapping no other, each memory of its session's tenant and agent, naming that
  session's entries inside one of its flushes.

A table that cannot be read to the end (a damaged page) is a fault too; verify reports it and
goes on with the next table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ..errors import LedgerError
from ..messages import (
    Message,
    canonical_json,
    load_json,
    message_from_dict,
    message_to_json,
    sha256_hex,
)
from . import _ledger_head
from ._backend import LedgerBackend
from ._bodies import unpack
from ._model import RECORD_TABLES, Fault, VerifyReport
from ._rows import HEAD, billed_tokens, body_matches, request_facts, seal_matches, whole
from ._seal import Sealer

if TYPE_CHECKING:
    from ._ledger import Store


@dataclass
class _Session:
    tenant: str
    next_seq: int
    entry_count: int
    token_total: int
    last_step: int | None
    head: Any = None
    # what the entries say
    entries: int = 0
    tokens: int = 0
    last_seq: int = -1
    step: int | None = None
    last_seal: Any = None


@dataclass
class _Walk:
    sealer: Sealer
    faults: list[Fault] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, _Session] = field(default_factory=dict)
    paused: list[str] = field(default_factory=list)

    def fault(
        self,
        session: str | None,
        table: str,
        row: Any,
        kind: str,
        detail: str,
        seq: int | None = None,
    ) -> None:
        self.faults.append(Fault(session, seq, kind, detail, table, row))

    def sealed(self, table: str, r: tuple[Any, ...], row: Any, session: Any) -> bool:
        if not seal_matches(self.sealer, table, r):
            self.fault(session, table, row, "seal", "row does not match its seal")
            return False
        return True

    def walk(
        self,
        table: str,
        rows: Callable[[], Iterator[tuple[Any, ...]]],
        check: Callable[[tuple[Any, ...]], None],
    ) -> None:
        count = 0
        try:
            for r in rows():
                count += 1
                check(r)
        except LedgerError as exc:
            self.fault(None, table, None, "unreadable", f"stopped after {count} rows: {exc}")
        self.rows[table] = count


def verify(ledger: LedgerBackend, *, database: bool = True, search: bool = False) -> VerifyReport:
    """Check every row of every table and the database itself (either backend).

    ``database=False`` skips the database's own check. ``search=True`` also re-indexes the
    stored text and compares it with the full-text indexes: slow (on SQLite about 10 s for
    20,000 indexed entries, against under 1 s for the rest), so it is asked for, not default.
    The indexes are derived data; ``rebuild_search_index()`` rebuilds them.
    """
    # Both backends are the one store: its raw walks are private to it.
    store = cast("Store", ledger)
    w = _Walk(store._sealer)
    if not w.sealer.checks:
        w.fault(None, "ledger", None, "secret", f"{w.sealer.problem}; seals were not checked")
    w.faults += store._opening_faults  # what a lenient open found: an older copy
    status = "not checked: skipped"
    if database:
        try:
            status, problems = store._database_check()
        except LedgerError as exc:
            status, problems = "faults", [str(exc)]
        for p in problems:
            w.fault(None, "database", None, "integrity", p)
    w.walk("sessions", lambda: store._raw_table("sessions"), lambda r: _session(w, r))
    _check_ledger_head(w, store)
    entries = _Entries(w)
    w.walk("entries", store._raw_entries, entries.check)
    entries.close_session()
    _counters(w)
    w.walk("requests", lambda: store._raw_table("requests"), lambda r: _request(w, r))
    try:
        for rid, sid, entry_id in store._raw_request_refs():
            w.fault(sid, "requests", rid, "entry-ref", f"entry {entry_id} is not in this session")
    except LedgerError as exc:
        w.fault(None, "requests", None, "unreadable", str(exc))
    try:
        for table, tenant, key, want, have in store._spend_mismatches():
            w.fault(None, table, None, "spend-total",
                    f"tenant {tenant!r} {key}: the running total says {have:,} tokens, its "
                    f"requests sum to {want:,}")  # fmt: skip
    except LedgerError as exc:
        w.fault(None, "spend_runs", None, "unreadable", str(exc))
    try:
        for sid, want_n, want_usd, have_n, have_usd in store._saving_mismatches():
            w.fault(sid, "sessions", sid, "counters",
                    f"the session counts {have_n} requests saving {have_usd} USD, its requests "
                    f"are {want_n} saving {want_usd} USD")  # fmt: skip
    except LedgerError as exc:
        w.fault(None, "sessions", None, "unreadable", str(exc))
    w.walk("checkpoints", lambda: store._raw_table("checkpoints"), lambda r: _checkpoint(w, r))
    w.walk("records", lambda: store._raw_table("records"), lambda r: _record(w, r))
    w.walk("deletions", lambda: store._raw_table("deletions"), lambda r: _deletion(w, r))
    w.walk("ledger_events", lambda: store._raw_table("ledger_events"),
           lambda r: _event(w, r))  # fmt: skip
    try:  # the dag engine's summaries (ledger/_summaries.py)
        w.faults += store.summary_faults()
    except LedgerError as exc:
        w.fault(None, "summaries", None, "unreadable", str(exc))
    try:  # memories across sessions (ledger/_memories.py)
        w.faults += store.memory_faults()
    except LedgerError as exc:
        w.fault(None, "memories", None, "unreadable", str(exc))
    if search:
        try:
            found = store._search_check()
        except LedgerError as exc:
            found = [str(exc)]
        for p in found:
            w.fault(None, "search", None, "search-index", p)
    return VerifyReport(
        not w.faults,
        w.rows.get("entries", 0),
        tuple(w.faults),
        tuple(w.paused),
        dict(w.rows),
        status,
        w.sealer.status(),
    )


def _deletion(w: _Walk, r: tuple[Any, ...]) -> None:
    w.sealed("deletions", r, r[13], r[0])


def _event(w: _Walk, r: tuple[Any, ...]) -> None:
    w.sealed("ledger_events", r, r[4], None)


def _check_ledger_head(w: _Walk, store: Store) -> None:
    """The ledger's sealed head against the sessions stored: a session deleted whole (its row
    and every row naming it) or put in from elsewhere shows here and nowhere else."""
    try:
        row = store._ledger_head_row()
    except LedgerError as exc:
        w.fault(None, "ledger_head", None, "unreadable", str(exc))
        return
    if row is None:
        w.fault(
            None,
            "ledger_head",
            _ledger_head.NAME,
            "missing",
            "the ledger's sealed head is missing, so a deleted session cannot be seen",
        )
        return  # fmt: skip
    if not _ledger_head.head_matches(w.sealer, store._ledger_id, row):
        w.fault(
            None,
            "ledger_head",
            _ledger_head.NAME,
            "seal",
            "the ledger's head does not match its seal (or the ledger's id was changed)",
        )
        return  # fmt: skip
    if not w.sealer.checks:
        return  # a session's mark needs the secret
    n, digest = _ledger_head.expected(w.sealer, w.sessions)
    claimed = row[1]
    if n == claimed and digest == row[2]:
        return
    if whole(claimed) and n != claimed:
        gone = claimed - n
        what = "deleted" if gone > 0 else "put in"
        count = f"{abs(gone)} session{'s' if abs(gone) != 1 else ''}"
        detail = f"the ledger's sealed head counts {claimed} sessions and {n} are stored: "
        detail += f"{count} {what} outside comal (comal's own deletions move the head)"
    else:
        detail = "the sessions stored are not those the ledger's head was sealed over: one was "
        detail += "replaced outside comal"
    w.fault(None, "ledger_head", _ledger_head.NAME, "sessions", detail)


def _session(w: _Walk, r: tuple[Any, ...]) -> None:
    sid = r[0]
    w.sealed("sessions", r, sid, sid)
    try:
        load_json(r[8])
    except Exception as exc:  # a meta that does not decode is reported, not raised
        w.fault(sid, "sessions", sid, "decode", f"meta does not decode: {exc}")
    counters = (r[13], r[10], r[11])
    if not all(whole(v) for v in counters) or not (r[12] is None or whole(r[12])):
        w.fault(sid, "sessions", sid, "type", "the session's counters are not numbers")
        counters = (-1, -1, -1)
    if not w.sealer.matches(HEAD, (sid, r[13], r[16]), r[17]):
        w.fault(sid, "sessions", sid, "head", "next_seq and head do not match the head's seal")
    w.sessions[sid] = _Session(r[1], *counters, r[12], r[16])


def _counters(w: _Walk) -> None:
    """Each session's counters and chain head against the entries stored."""
    for sid, s in w.sessions.items():
        found: list[tuple[str, str]] = []
        # Said in words when nothing is stored: a report never shows seq -1 or None.
        last = f"seq {s.last_seq}" if s.last_seq >= 0 else "none: no entry is stored"
        if s.next_seq > s.last_seq + 1:
            if sid in w.paused:  # it ends in open calls because its tail is gone, not paused
                w.paused.remove(sid)
            claims = f"the session claims entries up to seq {s.next_seq - 1}"
            found.append(("truncated", f"{claims}, the last stored is {last}"))
        elif s.next_seq != s.last_seq + 1:
            found.append(("counters", f"next_seq {s.next_seq}, the last stored entry is {last}"))
        if s.entry_count != s.entries or s.token_total != s.tokens:
            counts = f"counts {s.entry_count} entries / {s.token_total} tokens"
            found.append(("counters", f"{counts}, stored are {s.entries} / {s.tokens}"))
        if s.head != s.last_seal:
            if s.last_seq >= 0:
                head = f"the head is not the seal of the last stored entry (seq {s.last_seq})"
            else:
                head = "the head names an entry, and no entry is stored"
            found.append(("chain", head))
        if s.last_step != s.step:
            step = "no step is stored" if s.step is None else f"the last stored step is {s.step}"
            claims = "none" if s.last_step is None else str(s.last_step)
            found.append(("counters", f"last_step {claims}, {step}"))
        for kind, detail in found:
            w.fault(sid, "sessions", sid, kind, detail)


class _Entries:
    """The entry walk: one session at a time, in seq order."""

    def __init__(self, w: _Walk) -> None:
        self.w = w
        self.session: str | None = None
        self.expected = 0
        self.prev: Any = None  # the seal of the entry before, as stored
        self.open_step: tuple[int, set[str]] | None = None  # (step seq, calls unanswered)

    def close_session(self) -> None:
        if self.session is not None and self.open_step is not None and self.open_step[1]:
            self.w.paused.append(self.session)

    def check(self, r: tuple[Any, ...]) -> None:
        w = self.w
        sid, seq, step, role, tokens, size, _created, call_id, digest, output_digest = r[:10]
        prev_seal, seal, row, body = *r[10:13], unpack(r[13])
        if not (whole(seq) and whole(step) and whole(tokens)):
            w.fault(sid, "entries", row, "type", "seq, step or tokens is not a number")
            return
        if sid != self.session:
            self.close_session()
            self.session, self.expected, self.open_step, self.prev = sid, 0, None, None
            if sid not in w.sessions:
                orphan = "entries of a session that is not stored"
                w.fault(sid, "entries", row, "no-session", orphan, seq)
        s = w.sessions.get(sid)
        if s is not None:
            s.entries += 1
            s.tokens += tokens
            s.last_seq, s.step, s.last_seal = seq, step, seal
        if seq != self.expected:
            w.fault(sid, "entries", row, "gap", f"expected seq {self.expected}, found {seq}", seq)
        if prev_seal != self.prev:
            w.fault(sid, "entries", row, "chain", "prev_seal is not the seal of the entry before "
                    "it: an entry was removed, moved or put in", seq)  # fmt: skip
        self.expected, self.prev = seq + 1, seal
        w.sealed("entries", r, row, sid)
        if not body_matches(body, digest):
            w.fault(sid, "entries", row, "digest", "body does not match its sha256 digest", seq)
            return
        if size != len(body.encode("utf-8", "surrogatepass")):
            w.fault(sid, "entries", row, "size", f"size says {size}, the body has another", seq)
        try:
            msg = message_from_dict(json.loads(body))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            w.fault(sid, "entries", row, "decode", f"body does not decode: {exc}", seq)
            return
        if message_to_json(msg) != body:
            w.fault(sid, "entries", row, "canonical", "body is not in canonical form", seq)
        if msg.role.value != role:
            w.fault(sid, "entries", row, "role", f"column says {role}, body says {msg.role}", seq)
        result = msg.tool_result
        if (result.call_id if result is not None else None) != call_id:
            differs = f"column says {call_id!r}, the body differs"
            w.fault(sid, "entries", row, "call-id", differs, seq)
        for kind, detail in _check_output(msg, output_digest):
            w.fault(sid, "entries", row, kind, detail, seq)
        self._step(sid, seq, step, row, msg)

    def _step(self, sid: str, seq: int, step: int, row: Any, msg: Message) -> None:
        w = self.w
        if seq == step:
            if self.open_step is not None and self.open_step[1]:
                missing = f"calls without results: {', '.join(sorted(self.open_step[1]))}"
                w.fault(sid, "entries", row, "split-step", missing, self.open_step[0])
            self.open_step = (step, {c.id for c in msg.tool_calls})
        elif self.open_step is None or self.open_step[0] != step:
            w.fault(sid, "entries", row, "step", f"entry claims step {step} that is not open", seq)
        result = msg.tool_result
        if seq != step and result is not None and self.open_step is not None:
            if result.call_id in self.open_step[1]:
                self.open_step[1].discard(result.call_id)
            else:
                orphan = f"result for {result.call_id} answers no open call"
                w.fault(sid, "entries", row, "orphan", orphan, seq)


def _check_output(msg: Message, output_digest: str | None) -> list[tuple[str, str]]:
    result = msg.tool_result
    if result is None:
        if output_digest is not None:
            return [("output-digest", "non-result entry carries an output digest")]
        return []
    if output_digest != sha256_hex(result.text):
        return [("output-digest", "tool output does not match its digest")]
    return []


def _request(w: _Walk, r: tuple[Any, ...]) -> None:
    row, sid = r[17], r[0]
    if not w.sealed("requests", r, row, sid):
        return
    s = w.sessions.get(sid)
    if s is None:
        w.fault(sid, "requests", row, "no-session", "a request of a session that is not stored")
    elif r[1] != s.tenant:
        w.fault(sid, "requests", row, "request-facts", f"tenant {r[1]!r} is not the session's")
    try:
        meta = load_json(r[15])
    except Exception as exc:
        w.fault(sid, "requests", row, "decode", f"meta does not decode: {exc}")
        return
    derived = (billed_tokens(r[5], r[6], r[7], r[8]), *request_facts(meta))
    if tuple(r[10:14]) != derived:
        facts = f"tokens/run/spent_at/prompt_last_seq {tuple(r[10:14])} do not follow"
        w.fault(sid, "requests", row, "request-facts", f"{facts} from the usage and meta {derived}")


def _checkpoint(w: _Walk, r: tuple[Any, ...]) -> None:
    row, sid, body = r[8], r[0], r[9]
    if not w.sealed("checkpoints", r, row, sid):
        return
    if not body_matches(body, r[5]):
        w.fault(sid, "checkpoints", row, "digest", "body does not match its sha256 digest")
        return
    try:
        msg = message_from_dict(json.loads(body))
        load_json(r[6])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        w.fault(sid, "checkpoints", row, "decode", f"body or meta does not decode: {exc}")
        return
    if message_to_json(msg) != body:
        w.fault(sid, "checkpoints", row, "canonical", "body is not in canonical form")
    s = w.sessions.get(sid)
    if s is None:
        w.fault(sid, "checkpoints", row, "no-session", "a checkpoint of a session not stored")
    elif not 0 <= r[1] <= r[2] <= s.last_seq:
        have = f"entries 0..{s.last_seq}" if s.last_seq >= 0 else "entries (it stores none)"
        outside = f"range {r[1]}..{r[2]} is outside the session's {have}"
        w.fault(sid, "checkpoints", row, "range", outside)


def _record(w: _Walk, r: tuple[Any, ...]) -> None:
    row, sid, body = r[6], r[0], unpack(r[7])
    if not w.sealed("records", r, row, sid):
        return
    if r[1] not in RECORD_TABLES:
        w.fault(sid, "records", row, "table-name", f"unknown record table {r[1]!r}")
    if not body_matches(body, r[4]):
        w.fault(sid, "records", row, "digest", f"{r[1]} body does not match its sha256 digest")
        return
    try:
        value = load_json(body)
    except Exception as exc:
        w.fault(sid, "records", row, "decode", f"body does not decode: {exc}")
        return
    if canonical_json(value) != body:
        w.fault(sid, "records", row, "canonical", "body is not in canonical form")
    if sid not in w.sessions:
        w.fault(sid, "records", row, "no-session", "a record of a session that is not stored")
