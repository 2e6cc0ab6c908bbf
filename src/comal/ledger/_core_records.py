"""The shared core's checkpoints and records (receipts, summaries, events, preparations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import UserError
from ..messages import Message, canonical_json, message_to_json, sha256_hex
from ..tokens import count_message
from ._core_base import _CoreBase
from ._model import RECORD_TABLES, CheckpointRecord, Record, RecordTable, Scope
from ._rows import COLUMNS, checkpoint_from_row, record_from_row, seal_of
from ._sqlite_base import _now
from ._text import check_int, check_text, storable


class _Records(_CoreBase):
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
        created = _now()
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
            new = c.execute(
                self._q(
                    "INSERT INTO checkpoints (session_id, first_seq, last_seq, tokens, created_at,"
                    " digest, meta, seal, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
                ),
                (*sealed, seal_of("checkpoints", sealed), body),
            ).fetchone()
        return CheckpointRecord(
            int(new[0]),
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
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                self._q(
                    f"SELECT {COLUMNS['checkpoints']} FROM checkpoints WHERE session_id = ?"
                    f" ORDER BY {order}" + ("" if limit is None else f" LIMIT {int(limit)}")
                ),
                (scope.session,),
            ).fetchall()
        return [checkpoint_from_row(r) for r in rows]

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
        created = _now()
        with self.atomic() as c:
            self._require(scope)
            sealed = (scope.session, table, kind, created, digest)
            new = c.execute(
                self._q(
                    "INSERT INTO records (session_id, table_name, kind, created_at, digest, seal,"
                    " body) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"
                ),
                (*sealed, seal_of("records", sealed), text),
            ).fetchone()
            rid = int(new[0])
            if table == "summary" and isinstance(body.get("text"), str):
                self._index_summary(c, scope, rid, body["text"])
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
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                self._q(
                    f"SELECT {COLUMNS['records']} FROM records WHERE {where} ORDER BY id"
                    + ("" if limit is None else f" LIMIT {int(limit)}")
                ),
                tuple(args),
            ).fetchall()
        return [record_from_row(r) for r in rows]

    def record_mark(self, scope: Scope, table: RecordTable = "receipt") -> int:
        """The highest record id of ``table`` in the session (0 if none): one index lookup.

        ``records(scope, table, since_id=mark)`` later reads just what came after it.
        """
        with self._reading() as c:
            if not self._visible(scope):
                return 0
            row = c.execute(
                self._q("SELECT max(id) FROM records WHERE session_id = ? AND table_name = ?"),
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
                self._q(
                    "SELECT kind, count(*) FROM records WHERE session_id = ? AND table_name = ?"
                    f" AND kind IN ({', '.join('?' * len(kinds))}) GROUP BY kind"
                ),
                (scope.session, table, *kinds),
            ).fetchall()
        return {str(k): int(n) for k, n in rows}
