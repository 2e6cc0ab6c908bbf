"""Rows to values, checked: both backends select the same columns in the same order.

Every table's row carries a **seal** over the columns named in :data:`SEALED` (every stored
column but the seal itself and the body, whose own sha256 ``digest`` is sealed instead) and its
id (:func:`sealed_values`: a row's identity is part of what is sealed), keyed with the ledger's
secret (``_seal``). An entry's sealed columns end with ``prev_seal``, the
seal of the entry before it in its session, so the entries of a session form a chain; the
session row carries the chain's ``head`` (its last entry's seal) and ``head_seal``, the seal of
(session, next_seq, head), so a cut tail shows too. Decoding a row checks seal and digest, so a
row changed outside comal is a :class:`~comal.ledger.LedgerRowDamaged` naming table, row and
digests, and a row that does not decode is a :class:`~comal.ledger.LedgerCorrupt` — never
silently wrong data, never a traceback.

Each SELECT list starts with the sealed columns in order, then the seal, the id and the body.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..messages import load_json, message_from_json, sha256_hex
from ._bodies import unpack
from ._errors import InvalidIdentifier, LedgerCorrupt, LedgerRowDamaged
from ._model import (
    CheckpointRecord,
    Deletion,
    Entry,
    LedgerEvent,
    MemoryFlush,
    MemoryForget,
    MemoryRecord,
    Record,
    RequestRecord,
    SessionInfo,
)
from ._seal import NOT_SHOWN, Sealer

SEALED: dict[str, tuple[str, ...]] = {
    "sessions": (
        "id", "tenant", "agent", "parent", "status", "created_at", "title", "source", "meta",
    ),
    "entries": (
        "session_id", "seq", "step", "role", "tokens", "size", "created_at", "call_id",
        "digest", "output_digest", "prev_seal",
    ),
    "requests": (
        "session_id", "tenant", "entry_id", "model", "protocol", "new_input", "cache_read",
        "cache_write", "output", "reasoning", "tokens", "run", "spent_at", "prompt_last_seq",
        "created_at", "meta",
    ),
    "checkpoints": (
        "session_id", "first_seq", "last_seq", "tokens", "created_at", "digest", "meta",
    ),
    "records": ("session_id", "table_name", "kind", "created_at", "digest"),
    "deletions": (
        "session_id", "tenant", "agent", "parent", "title", "created_at", "deleted_at",
        "deleted_by", "entries", "tokens", "row_counts", "digest",
    ),
    "summaries": (
        "session_id", "depth", "kind", "first_seq", "last_seq", "descendant_count",
        "descendant_tokens", "time_start", "time_end", "tokens", "summarizer", "level", "digest",
        "created_at", "meta", "sources_digest", "frontier",
    ),
    "memory_flushes": (
        "session_id", "first_seq", "last_seq", "why", "extractor", "facts", "created_at",
    ),
    "memories": (
        "session_id", "tenant", "agent", "first_seq", "last_seq", "entry_ids", "kind",
        "extractor", "digest", "created_at",
    ),
    "ledger_events": ("kind", "created_at", "body"),
    "memory_forgets": (
        "session_id", "memory_id", "tenant", "agent", "digest", "forgotten_by", "why",
        "created_at",
    ),
}  # fmt: skip

# What follows the sealed columns in each SELECT list.
_TRAILERS = {
    "sessions": (
        "seal",
        "entry_count",
        "token_total",
        "last_step",
        "next_seq",
        "request_count",
        "saved_usd",
        "head",
        "head_seal",
    ),
    "entries": ("seal", "id", "body"),
    "requests": ("seal", "id"),
    "checkpoints": ("seal", "id", "body"),
    "records": ("seal", "id", "body"),
    "deletions": ("seal", "id"),
    "summaries": ("seal", "id", "body"),
    "memory_flushes": ("seal", "id"),
    "memories": ("seal", "id", "body"),
    "ledger_events": ("seal", "id"),
    "memory_forgets": ("seal", "id"),
}
COLUMNS = {t: ", ".join(SEALED[t] + _TRAILERS[t]) for t in SEALED}
# The session's chain head is sealed apart from its row: (id, next_seq, head).
HEAD = "session_heads"


def sealed_values(table: str, r: Sequence[Any]) -> tuple[Any, ...]:
    """What a row's seal covers: its sealed columns and, but for a session (whose id is its
    first sealed column), its id, which follows the seal in every SELECT list. With the id
    inside, two rows that trade ids (or contents) no longer match their seals."""
    n = len(SEALED[table])
    return tuple(r[:n]) if table == "sessions" else (*r[:n], r[n + 1])


def seal_row(sealer: Sealer, table: str, values: Sequence[Any], row_id: Any) -> str:
    """The seal of a new row of ``table`` (not ``sessions``) with id ``row_id``."""
    return sealer.seal(table, (*values, row_id))


def seal_matches(sealer: Sealer, table: str, r: Sequence[Any]) -> bool:
    return sealer.matches(table, sealed_values(table, r), r[len(SEALED[table])])


def check_seal(sealer: Sealer, table: str, r: Sequence[Any], row_id: Any, session: Any) -> None:
    if not seal_matches(sealer, table, r):
        stored = str(r[len(SEALED[table])])
        raise LedgerRowDamaged(table, row_id, session, "seal", stored, NOT_SHOWN)


def check_head(sealer: Sealer, session: str, next_seq: Any, head: Any, seal: Any) -> None:
    """Refuse to extend a chain whose head was changed: a new head would seal the change in."""
    if not sealer.matches(HEAD, (session, next_seq, head), seal):
        raise LedgerRowDamaged("sessions", session, session, "seal", str(seal), NOT_SHOWN)


def body_matches(body: Any, digest: Any) -> bool:
    return isinstance(body, str) and sha256_hex(body) == digest


def check_body(table: str, r: Sequence[Any], digest: str, body: Any, row_id: Any) -> None:
    if not body_matches(body, digest):
        computed = sha256_hex(body) if isinstance(body, str) else "(the body is not text)"
        raise LedgerRowDamaged(table, row_id, r[0], "body", str(digest), computed)


def whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def damaged_index(target: str | None, what: str) -> LedgerCorrupt:
    return LedgerCorrupt(
        target,
        f"{what}: the database is damaged",
        "run `comal verify` to see where, and restore the ledger from a backup",
    )


def _corrupt(table: str, row_id: Any, session: Any, exc: BaseException) -> LedgerCorrupt:
    return LedgerCorrupt(
        None,
        f"{table} row {row_id} of session {session} does not decode ({type(exc).__name__}: "
        f"{str(exc)[:200]})",
        "the ledger was changed outside comal: run `comal verify` and restore it from a backup",
    )


def load_column(table: str, text: Any, row_id: Any, session: Any) -> Any:
    try:
        return load_json(text)
    except Exception as exc:  # any decode failure of stored bytes is corruption, coded
        raise _corrupt(table, row_id, session, exc) from exc


def session_from_row(sealer: Sealer, r: Sequence[Any]) -> SessionInfo:
    check_seal(sealer, "sessions", r, r[0], r[0])
    saved = r[15]
    if not (whole(r[10]) and whole(r[11]) and whole(r[14])) or not (
        saved is None or (isinstance(saved, (int, float)) and not isinstance(saved, bool))
    ):
        raise damaged_index(None, f"session {r[0]}'s counters are not numbers")
    meta = load_column("sessions", r[8], r[0], r[0])
    return SessionInfo(
        r[0], r[1], r[2], r[3], r[4], r[6], r[7], r[5], r[10], r[11], meta, r[14],
        None if saved is None else float(saved),
    )  # fmt: skip


def entry_from_row(sealer: Sealer, r: Sequence[Any]) -> Entry:
    row_id, body = r[12], unpack(r[13])
    check_seal(sealer, "entries", r, row_id, r[0])
    check_body("entries", r, r[8], body, row_id)
    try:
        message = message_from_json(body)
    except Exception as exc:  # digest matched, yet it does not decode: written damaged
        raise _corrupt("entries", row_id, r[0], exc) from exc
    return Entry(row_id, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[8], r[9], message)


def request_from_row(sealer: Sealer, r: Sequence[Any]) -> RequestRecord:
    row_id = r[17]
    check_seal(sealer, "requests", r, row_id, r[0])
    meta = load_column("requests", r[15], row_id, r[0])
    return RequestRecord(
        row_id, r[0], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], meta, r[14], r[10]
    )


def checkpoint_from_row(sealer: Sealer, r: Sequence[Any]) -> CheckpointRecord:
    row_id, body = r[8], r[9]
    check_seal(sealer, "checkpoints", r, row_id, r[0])
    check_body("checkpoints", r, r[5], body, row_id)
    meta = load_column("checkpoints", r[6], row_id, r[0])
    try:
        message = message_from_json(body)
    except Exception as exc:
        raise _corrupt("checkpoints", row_id, r[0], exc) from exc
    return CheckpointRecord(row_id, r[0], r[1], r[2], r[3], r[5], r[4], message, meta)


def record_from_row(sealer: Sealer, r: Sequence[Any]) -> Record:
    row_id, body = r[6], unpack(r[7])
    check_seal(sealer, "records", r, row_id, r[0])
    check_body("records", r, r[4], body, row_id)
    return Record(row_id, r[0], r[2], r[3], r[4], load_column("records", body, row_id, r[0]), r[1])


def deletion_from_row(sealer: Sealer, r: Sequence[Any]) -> Deletion:
    row_id = r[13]
    check_seal(sealer, "deletions", r, row_id, r[0])
    rows = load_column("deletions", r[10], row_id, r[0])
    return Deletion(row_id, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], rows, r[11])


def event_from_row(sealer: Sealer, r: Sequence[Any]) -> LedgerEvent:
    row_id = r[4]
    check_seal(sealer, "ledger_events", r, row_id, None)
    body = load_column("ledger_events", r[2], row_id, None)
    return LedgerEvent(int(row_id), r[0], r[1], body if isinstance(body, dict) else {})


def forget_from_row(sealer: Sealer, r: Sequence[Any]) -> MemoryForget:
    row_id = r[9]
    check_seal(sealer, "memory_forgets", r, row_id, r[0])
    return MemoryForget(int(row_id), int(r[1]), r[2], r[3], r[0], r[4], r[5], r[6], r[7])


def flush_from_row(sealer: Sealer, r: Sequence[Any]) -> MemoryFlush:
    row_id = r[8]
    check_seal(sealer, "memory_flushes", r, row_id, r[0])
    return MemoryFlush(int(row_id), r[0], int(r[1]), int(r[2]), r[3], r[4], int(r[5]), r[6])


def memory_from_row(sealer: Sealer, r: Sequence[Any]) -> MemoryRecord:
    row_id, body = r[11], r[12]
    check_seal(sealer, "memories", r, row_id, r[0])
    if not isinstance(body, str) or sha256_hex(body) != r[8]:
        computed = sha256_hex(body) if isinstance(body, str) else "(the body is not text)"
        raise LedgerRowDamaged("memories", row_id, r[0], "body", str(r[8]), computed)
    ids = load_column("memories", r[5], row_id, r[0])
    if not (isinstance(ids, list) and all(whole(i) for i in ids)):
        raise _corrupt("memories", row_id, r[0], ValueError("entry_ids is not a list of ids"))
    return MemoryRecord(
        int(row_id),
        r[1],
        r[2],
        r[0],
        None if r[3] is None else int(r[3]),  # a person's note has no seqs
        None if r[4] is None else int(r[4]),
        tuple(ids),
        r[6],
        body,
        r[7],
        r[8],
        r[9],
    )


# -- values on their way in ------------------------------------------------------------------
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
MAX_ID_LENGTH = 256


def check_identifier(kind: str, value: object) -> None:
    """Tenant, agent and session ids: printable text, not blank, not padded, not huge."""
    if not isinstance(value, str):
        raise InvalidIdentifier(f"{kind} id must be text, not {type(value).__name__}")
    if not value.strip():
        raise InvalidIdentifier(
            f"{kind} id {value!r} is empty or only whitespace; give a name such as 'local'"
        )
    if value != value.strip():
        raise InvalidIdentifier(
            f"{kind} id {value!r} starts or ends with whitespace; remove it ({value.strip()!r})"
        )
    bad = sorted({c for c in value if unicodedata.category(c) in _BAD_CATEGORIES})
    if bad:
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
        raise InvalidIdentifier(
            f"{kind} id {value!r} holds control, format or unassigned characters ({shown}); "
            "use printable characters only"
        )
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdentifier(
            f"{kind} id is {len(value)} characters long; keep it under {MAX_ID_LENGTH}"
        )


def utc_text(value: object) -> str | None:
    """An ISO time as fixed-width UTC text (so text order is time order); None if it is not one.

    A time without a zone is read as UTC, as the spend guard always has.
    """
    if isinstance(value, datetime):
        when = value
    elif isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    try:
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return when.isoformat(timespec="microseconds")


def billed_tokens(
    new_input: int | None, cache_read: int | None, cache_write: int | None, output: int | None
) -> int:
    """Everything a request was billed for (output includes reasoning); unknown adds nothing."""
    return sum(n or 0 for n in (new_input, cache_read, cache_write, output))


def request_facts(meta: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    """(run, spent_at, prompt_last_seq) as the agent writes them into a request's meta."""
    run = meta.get("run")
    seq = meta.get("prompt_last_seq")
    return (
        run if isinstance(run, str) else None,
        utc_text(meta.get("at")),
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
    )
