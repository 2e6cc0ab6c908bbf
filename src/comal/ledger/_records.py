"""Checkpoints, records (receipts, summaries, events, preparations) and the reads of the request
log: per-turn aggregates, each one index range or one row."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ..errors import UserError
from ..messages import Message, canonical_json, message_to_json, sha256_hex
from ..tokens import count_message
from ._model import RECORD_TABLES, CheckpointRecord, Record, RecordTable, RequestRecord, Scope
from ._rows import checkpoint_from_row, record_from_row, request_from_row, seal_row, utc_text
from ._sessions import USAGE_FIELDS
from ._store import StoreBase, now
from ._text import check_int, check_text, storable


class Records(StoreBase):
    # -- checkpoints ----------------------------------------------------------------------------
    def add_checkpoint(
        self,
        scope: Scope,
        message: Message,
        *,
        first_seq: int,
        last_seq: int,
        meta: dict[str, Any] | None = None,
    ) -> CheckpointRecord:
        if not isinstance(message, Message):
            raise UserError(f"a checkpoint is a Message, not {type(message).__name__}")
        check_int(first_seq=first_seq, last_seq=last_seq)
        body = message_to_json(message)
        tokens = count_message(self.counter, message)
        digest = sha256_hex(body)
        created = now()
        with self.atomic() as c:
            next_seq = int(self._require(scope)[0])
            if not 0 <= first_seq <= last_seq < next_seq:
                raise UserError(
                    f"checkpoint range {first_seq}..{last_seq} is outside the session's "
                    f"entries 0..{next_seq - 1}"
                )
            sealed: tuple[Any, ...] = (scope.session, first_seq, last_seq, tokens, created)
            sealed += (digest,)
            sealed += (canonical_json(meta or {}),)
            (cid,) = self._dialect.new_ids(c, "checkpoints", 1)
            c.execute(
                "INSERT INTO checkpoints (id, session_id, first_seq, last_seq, tokens,"
                f" created_at, digest, meta, seal, body){self._dialect.overriding}"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, *sealed, seal_row(self._sealer, "checkpoints", sealed, cid), body),
            )
        return CheckpointRecord(
            cid,
            scope.session,
            first_seq,
            last_seq,
            tokens,
            digest,
            created,
            message,
            meta or {},
        )

    def checkpoints(self, scope: Scope) -> list[CheckpointRecord]:
        return self._checkpoints(scope, "last_seq, id", None)

    def latest_checkpoint(self, scope: Scope) -> CheckpointRecord | None:
        found = self._checkpoints(scope, "last_seq DESC, id DESC", 1)
        return found[0] if found else None

    def _checkpoints(self, scope: Scope, order: str, limit: int | None) -> list[CheckpointRecord]:
        rows = self._select("checkpoints", "session_id = ?", (scope.session,), order, limit, scope)
        return [checkpoint_from_row(self._sealer, r) for r in rows]

    # -- receipts, summaries, events, preparations -----------------------------------------------
    def add_record(
        self,
        scope: Scope,
        table: RecordTable,
        kind: str,
        body: dict[str, Any],
    ) -> Record:
        if table not in RECORD_TABLES:
            raise UserError(f"record table must be one of {RECORD_TABLES}, not {table!r}")
        if not isinstance(kind, str) or not kind:
            raise UserError(f"a record kind is non-empty text, not {kind!r}")
        check_text(kind=kind)
        text = canonical_json(body)
        digest = sha256_hex(text)
        created = now()
        with self.atomic() as c:
            (rid,) = self._require(scope, ids=("records", 1))[5]
            sealed = (scope.session, table, kind, created, digest)
            c.execute(
                "INSERT INTO records (id, session_id, table_name, kind, created_at, digest, seal,"
                f" body){self._dialect.overriding} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, *sealed, seal_row(self._sealer, "records", sealed, rid), self._stored(text)),
            )
            if table == "summary" and isinstance(body.get("text"), str):
                self._dialect.index_text(c, "summaries_fts", scope.session, [(rid, body["text"])])
        return Record(rid, scope.session, kind, created, digest, body, table)

    def record(self, scope: Scope, table: RecordTable, record_id: int) -> Record | None:
        """One record of this session by id (None if it is not this session's)."""
        check_int(record_id=record_id)
        found = self._records(
            scope,
            "id = ? AND session_id = ? AND table_name = ?",
            [record_id, scope.session, table],
            None,
        )
        return found[0] if found else None

    def records(
        self,
        scope: Scope,
        table: RecordTable,
        *,
        kinds: Sequence[str] | None = None,
        since_id: int | None = None,
        limit: int | None = None,
    ) -> list[Record]:
        """A session's records of ``table`` in id order, from an index.

        ``kinds`` narrows them in the query (a caller looking for a few small events decodes no
        stored outputs); ``since_id`` keeps those after that id and ``limit`` the first ``limit``
        of them, so a live tail reads only what is new (``since_id`` = the last id it showed).
        """
        check_int(since_id=since_id, limit=limit)
        if kinds is not None and not kinds:
            return []
        where = "session_id = ? AND table_name = ?"
        args: list[Any] = [scope.session, table]
        if kinds is not None:
            kinds = [k for k in kinds if storable(k)]
            if not kinds:
                return []
            where += f" AND kind IN ({', '.join('?' * len(kinds))})"
            args += kinds
        if since_id is not None:
            where += " AND id > ?"
            args.append(int(since_id))
        if limit is not None and limit < 0:
            raise UserError(f"limit must be 0 or more, not {limit}")
        return self._records(scope, where, args, limit)

    def _records(
        self, scope: Scope, where: str, args: Sequence[Any], limit: int | None
    ) -> list[Record]:
        rows = self._select("records", where, args, "id", limit, scope)
        return [record_from_row(self._sealer, r) for r in rows]

    def record_mark(self, scope: Scope, table: RecordTable = "receipt") -> int:
        """The highest record id of ``table`` in the session (0 if none): one index lookup.

        ``records(scope, table, since_id=mark)`` later reads just what came after it.
        """
        with self._reading() as c:
            if not self._visible(scope):
                return 0
            row = c.execute(
                "SELECT max(id) FROM records WHERE session_id = ? AND table_name = ?",
                (scope.session, table),
            ).fetchone()
        return int(row[0] or 0)

    def record_counts(
        self, scope: Scope, table: RecordTable, kinds: Sequence[str]
    ) -> dict[str, int]:
        """How many records of each of ``kinds`` the session holds (kinds it lacks are absent),
        counted in the ``records_kind`` index without reading a body."""
        kinds = [k for k in kinds if storable(k)]
        if not kinds:
            return {}
        with self._reading() as c:
            if not self._visible(scope):
                return {}
            rows = c.execute(
                "SELECT kind, count(*) FROM records WHERE session_id = ? AND table_name = ?"
                f" AND kind IN ({', '.join('?' * len(kinds))}) GROUP BY kind",
                (scope.session, table, *kinds),
            ).fetchall()
        return {str(k): int(n) for k, n in rows}

    # -- requests: the per-turn aggregates ------------------------------------------------------
    def requests(self, scope: Scope) -> list[RequestRecord]:
        """Every request of the session, oldest first (a whole-session read: not per turn)."""
        return self._requests("session_id = ?", (scope.session,), scope, "id")

    def _requests(
        self, where: str, args: Sequence[Any], scope: Scope, order: str, limit: int | None = None
    ) -> list[RequestRecord]:
        rows = self._select("requests", where, args, order, limit, scope)
        return [request_from_row(self._sealer, r) for r in rows]

    def last_request(self, scope: Scope, *, measured: bool = True) -> RequestRecord | None:
        """The session's newest request, read from an index (one row, whatever the history).

        ``measured`` (the default) narrows it to requests that can anchor a TOK-2 estimate: an
        entry id, a measured new input, and the prompt's last seq (``meta.prompt_last_seq``),
        which is what the agent's estimate looks for.
        """
        where = "session_id = ?"
        if measured:
            where += (
                " AND entry_id IS NOT NULL AND new_input IS NOT NULL"
                " AND prompt_last_seq IS NOT NULL"
            )
        found = self._requests(where, (scope.session,), scope, "id DESC", 1)
        return found[0] if found else None

    def spend(
        self, tenant: str, *, since: str | datetime | None = None, run: str | None = None
    ) -> int:
        """Tokens billed to the tenant's requests (new input + cache reads and writes + output;
        unknown counts add nothing), from an index range: the cost follows the window, not
        the ledger.

        ``since`` (an ISO time or datetime; naive is UTC) counts requests the comal runtime made
        at or after it (``meta.at``; imported usage carries no time and was spent elsewhere);
        ``run`` counts the requests of one run (``meta.run``). Give one or both.
        """
        if since is None and run is None:
            raise UserError("spend needs since=, run= or both")
        if not storable(tenant) or (run is not None and not storable(run)):
            return 0
        start = None
        if since is not None:
            start = utc_text(since)
            if start is None:
                raise UserError(f"since {since!r} is not an ISO time")
        with self._reading() as c:
            if start is None:  # one run: its running total
                row = c.execute(
                    "SELECT tokens FROM spend_runs WHERE tenant = ? AND run = ?",
                    (tenant, run),
                ).fetchone()
                return int(row[0]) if row else 0
            if run is None:
                # Whole minutes after ``since`` from the running totals (at most 1,440 rows a
                # day), the rest of its own minute from the requests themselves.
                minute = start[:16]
                try:
                    boundary = utc_text(datetime.fromisoformat(minute) + timedelta(minutes=1))
                except OverflowError:
                    boundary = None
                row = c.execute(
                    "SELECT (SELECT coalesce(sum(tokens), 0) FROM spend_minutes"
                    " WHERE tenant = ? AND minute > ?), (SELECT coalesce(sum(tokens), 0)"
                    " FROM requests WHERE tenant = ? AND spent_at >= ? AND spent_at < ?)",
                    (tenant, minute, tenant, start, boundary or "A"),
                ).fetchone()
                return int(row[0]) + int(row[1])
            row = c.execute(
                "SELECT coalesce(sum(tokens), 0) FROM requests"
                " WHERE tenant = ? AND run = ? AND spent_at >= ?",
                (tenant, run, start),
            ).fetchone()
        return int(row[0])

    def usage_totals(self, scope: Scope, *, run: str | None = None) -> dict[str, int | None]:
        """Per TOK-1 field, the sum over the session's requests (of ``run`` only, if given);
        ``None`` where nothing was reported; ``requests`` counts them."""
        where, args = "session_id = ?", [scope.session]
        if run is not None:
            if not storable(run):
                return {"requests": 0, **dict.fromkeys(USAGE_FIELDS)}
            where, args = "tenant = ? AND run = ? AND session_id = ?", [scope.tenant, run, *args]
        sums = ", ".join(f"sum({f})" for f in USAGE_FIELDS)
        with self._reading() as c:
            if not self._visible(scope):
                return {"requests": 0, **dict.fromkeys(USAGE_FIELDS)}
            row = c.execute(
                (f"SELECT count(*), {sums} FROM requests WHERE {where}"), tuple(args)
            ).fetchone()
        values = [None if v is None else int(v) for v in row[1:]]
        return {"requests": int(row[0]), **dict(zip(USAGE_FIELDS, values, strict=True))}

    def usage_by_model(self, scope: Scope) -> list[tuple[str | None, str | None, dict[str, Any]]]:
        """The session's usage per (model, protocol): ``requests`` and the sum of each TOK-1
        field (``None`` where nothing was reported), aggregated in the query, so pricing a
        session reads one row per model rather than every request."""
        sums = ", ".join(f"sum({f})" for f in USAGE_FIELDS)
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                f"SELECT model, protocol, count(*), {sums} FROM requests"
                " WHERE session_id = ? GROUP BY model, protocol ORDER BY min(id)",
                (scope.session,),
            ).fetchall()
        out: list[tuple[str | None, str | None, dict[str, Any]]] = []
        for model, protocol, count, *values in rows:
            fields = {
                f: None if v is None else int(v) for f, v in zip(USAGE_FIELDS, values, strict=True)
            }
            out.append((model, protocol, {"requests": int(count), **fields}))
        return out
