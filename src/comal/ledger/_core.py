"""The ledger's semantics written once, over a :class:`~comal.ledger._sql.Dialect`.

Sessions, appends, requests, checkpoints, records, deletions and the per-turn aggregates are the
same statements on SQLite and PostgreSQL; a backend supplies its connection (``atomic`` and
``_reading``), how a batch of entries is inserted, and what its full-text index needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import LedgerError, UserError
from ..messages import Message, canonical_json, group_messages, message_to_json, sha256_hex
from ..tokens import TokenCounter, count_message
from ._common import check_step_shape, prepare, usage_anchor
from ._errors import SessionHasChildren
from ._hardening import SPEND_MINUTES, SPEND_RUNS
from ._model import (
    RECORD_TABLES,
    STATUSES,
    CheckpointRecord,
    Deletion,
    Entry,
    Record,
    RecordTable,
    RequestRecord,
    Scope,
    SessionInfo,
    log,
)
from ._rows import (
    COLUMNS,
    SEALED,
    billed_tokens,
    check_identifier,
    check_seal,
    checkpoint_from_row,
    damaged_index,
    deletion_from_row,
    record_from_row,
    request_facts,
    request_from_row,
    seal_of,
    session_from_row,
    utc_text,
    whole,
)
from ._sql import Dialect
from ._sqlite_base import StepInput, UsageInput, _now
from ._text import check_int, check_text, storable

# Tables this module owns rows of; a session's rows in any other table with a ``session_id``
# column (a later migration's) are deleted with it too.
OWN_TABLES = frozenset(
    {"sessions", "entries", "requests", "checkpoints", "records", "deletions", "fts_state"}
    | {"entries_fts", "summaries_fts", "schema_migrations", "spend_runs", "spend_minutes"}
)
ENTRY_INSERT = (
    "INSERT INTO entries (session_id, seq, step, role, tokens, size, created_at, call_id, digest,"
    " output_digest, seal, body)"
)
_MAX_INT = 2**63 - 1
_USAGE_FIELDS = ("new_input", "cache_read", "cache_write", "output", "reasoning")


class _Core:
    """Every read takes a Scope and reads nothing when it does not resolve (LED-2)."""

    counter: TokenCounter
    target: str
    _dialect: Dialect

    if TYPE_CHECKING:

        def atomic(self) -> AbstractContextManager[Any]: ...
        def _reading(self) -> AbstractContextManager[Any]: ...
        def _insert_entries(self, c: Any, rows: list[tuple[Any, ...]]) -> list[int]: ...
        def _index_entries(self, c: Any, scope: Scope, entries: list[Entry]) -> None: ...
        def _index_summary(self, c: Any, scope: Scope, record_id: int, text: str) -> None: ...
        def _forget_text(self, c: Any, session: str) -> None: ...
        def _session_tables(self, c: Any) -> list[str]: ...
        def _lenient(self) -> AbstractContextManager[Any]: ...

    def _q(self, sql: str) -> str:
        return self._dialect.q(sql)

    # -- scoping ------------------------------------------------------------------------------
    def _session_row(self, scope: Scope, *, lock: bool = False) -> tuple[Any, ...] | None:
        """(next_seq, status, last_step) of the scope's session, or None when it does not resolve.

        ``lock`` (inside ``atomic``) serializes appends to one session on PostgreSQL: the second
        writer waits for the first to commit and then reads its next_seq.
        """
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return None  # no stored session can have such a name
        query = self._q(
            "SELECT next_seq, status, last_step FROM sessions"
            " WHERE id = ? AND tenant = ? AND agent = ?"
        ) + (self._dialect.for_update if lock else "")
        with self._reading() as c:
            row: tuple[Any, ...] | None = c.execute(
                query, (scope.session, scope.tenant, scope.agent)
            ).fetchone()
        if row is not None and not (whole(row[0]) and (row[2] is None or whole(row[2]))):
            raise damaged_index(self.target, f"session {scope.session}'s counters are not numbers")
        return row

    def _visible(self, scope: Scope) -> bool:
        """LED-2: a scope that does not resolve to a stored session reads as empty."""
        if self._session_row(scope) is None:
            log.warning("ledger read refused: no session %s for tenant/agent", scope.session)
            return False
        return True

    def _require(self, scope: Scope, *, lock: bool = False) -> tuple[Any, ...]:
        row = self._session_row(scope, lock=lock)
        if row is None:
            raise UserError(
                f"no session {scope.session} for tenant {scope.tenant!r} and agent "
                f"{scope.agent!r}; create it first (or list them with `comal sessions`)"
            )
        return row

    # -- sessions -----------------------------------------------------------------------------
    def create_session(
        self,
        tenant: str,
        agent: str,
        *,
        session_id: str | None = None,
        parent: str | None = None,
        title: str | None = None,
        source: str | None = None,
        meta: dict[str, Any] | None = None,
        created_at: str | datetime | None = None,
        status: str = "active",
        messages: Sequence[Message] = (),
    ) -> Scope:
        """A new session; with ``messages``, its first steps are stored in the same transaction
        (a crash leaves neither). ``created_at`` (an ISO time; an import's own start) defaults to
        now and ``status`` to ``active`` (imports of finished transcripts pass ``finished``).

        Ids must be printable, non-blank and unpadded (:class:`InvalidIdentifier` otherwise).
        """
        check_identifier("tenant", tenant)
        check_identifier("agent", agent)
        if session_id is not None:
            check_identifier("session", session_id)
        if status not in STATUSES:
            raise UserError(f"status must be one of {STATUSES}, not {status!r}")
        when = _now() if created_at is None else utc_text(created_at)
        if when is None:
            raise UserError(
                f"created_at {created_at!r} is not an ISO time such as 2025-01-31T12:00Z"
            )
        check_text(parent=parent, title=title, source=source)
        for i, m in enumerate(messages):
            if not isinstance(m, Message):
                raise UserError(f"message {i} is {type(m).__name__}, not a Message")
        scope = Scope(tenant, agent, session_id or str(uuid.uuid4()))
        values: tuple[Any, ...] = (scope.session, tenant, agent, parent, status, when, title)
        values += (source, canonical_json(meta or {}))
        with self.atomic() as c:
            if parent is not None:
                row = c.execute(
                    self._q("SELECT 1 FROM sessions WHERE id = ? AND tenant = ?"), (parent, tenant)
                ).fetchone()
                if row is None:
                    raise UserError(f"parent session {parent} not found for tenant {tenant!r}")
            # ON CONFLICT keeps the transaction usable, so an outer atomic() survives a clash.
            inserted = c.execute(
                self._q(
                    "INSERT INTO sessions (id, tenant, agent, parent, status, created_at, title,"
                    " source, meta, seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (id) DO NOTHING RETURNING id"
                ),
                (*values, seal_of("sessions", values)),
            ).fetchone()
            if inserted is None:
                raise UserError(f"session {scope.session} already exists")
            for group in group_messages(messages):
                self._append_step(c, scope, StepInput(group.messages), join_step=None)
        return scope

    def session(self, scope: Scope) -> SessionInfo | None:
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return None
        rows = self._session_query(
            "id = ? AND tenant = ? AND agent = ?", (scope.session, scope.tenant, scope.agent)
        )
        return rows[0] if rows else None

    def sessions(self, *, tenant: str | None = None, agent: str | None = None) -> list[SessionInfo]:
        """Operator listing, optionally narrowed to a tenant and agent."""
        where, args = ["1 = 1"], []
        for column, value in (("tenant", tenant), ("agent", agent)):
            if value is not None:
                if not storable(value):
                    return []
                where.append(f"{column} = ?")
                args.append(value)
        return self._session_query(" AND ".join(where), args)

    def _session_query(self, where: str, args: Sequence[Any]) -> list[SessionInfo]:
        with self._reading() as c:
            rows = c.execute(
                self._q(
                    f"SELECT {COLUMNS['sessions']} FROM sessions WHERE {where}"
                    " ORDER BY created_at, id"
                ),
                tuple(args),
            ).fetchall()
        return [session_from_row(r) for r in rows]

    def resolve(self, session_prefix: str) -> Scope:
        """Operator lookup: the full scope of the session whose id starts with the prefix."""
        if not session_prefix:
            raise UserError("empty session id")
        rows: list[tuple[Any, ...]] = []
        if storable(session_prefix):
            with self._reading() as c:
                # Byte-wise prefix range on the primary key (PostgreSQL keys use the C collation).
                rows = c.execute(
                    self._q(
                        "SELECT tenant, agent, id FROM sessions WHERE id >= ? AND id < ? LIMIT 2"
                    ),
                    (session_prefix, session_prefix + "\U0010ffff"),
                ).fetchall()
        if not rows:
            raise UserError(
                f"no session matches {session_prefix!r}; list them with `comal sessions`"
            )
        if len(rows) > 1:
            raise UserError(f"session prefix {session_prefix!r} is ambiguous; give more characters")
        if not all(isinstance(v, str) and v for v in rows[0]):
            raise damaged_index(
                self.target, f"the session matching {session_prefix!r} has no scope"
            )
        return Scope(*rows[0])

    def children(self, scope: Scope) -> list[SessionInfo]:
        if not self._visible(scope):
            return []
        return self._session_query("parent = ? AND tenant = ?", (scope.session, scope.tenant))

    def set_status(self, scope: Scope, status: str) -> None:
        if status not in STATUSES:
            raise UserError(f"status must be one of {STATUSES}, not {status!r}")
        with self.atomic() as c:
            self._reseal_session(c, scope, status=status)

    def rename_session(self, scope: Scope, title: str | None) -> None:
        """Set (or, with None, clear) the session's title."""
        if title is not None and not isinstance(title, str):
            raise UserError(f"a title is text, not {type(title).__name__}")
        check_text(title=title)
        with self.atomic() as c:
            self._reseal_session(c, scope, title=title)

    def _reseal_session(self, c: Any, scope: Scope, **changes: Any) -> None:
        self._require(scope, lock=True)
        row = c.execute(
            self._q(f"SELECT {COLUMNS['sessions']} FROM sessions WHERE id = ?"), (scope.session,)
        ).fetchone()
        # Resealing a damaged row would launder the damage: check it first.
        check_seal("sessions", row, row[0], row[0])
        cols = SEALED["sessions"]
        values = list(row[: len(cols)])
        for name, value in changes.items():
            values[cols.index(name)] = value
        sets = ", ".join(f"{name} = ?" for name in changes)
        c.execute(
            self._q(f"UPDATE sessions SET {sets}, seal = ? WHERE id = ?"),
            (*changes.values(), seal_of("sessions", values), scope.session),
        )

    # -- appends ------------------------------------------------------------------------------
    def append(
        self,
        scope: Scope,
        messages: Sequence[Message],
        *,
        usage: UsageInput | None = None,
        join_step: int | None = None,
        created_at: str | None = None,
    ) -> list[Entry]:
        """Append one step atomically. ``join_step`` adds messages (tool results arriving later)
        to the session's latest step instead of opening a new one."""
        with self.atomic() as c:
            return self._append_step(
                c,
                scope,
                StepInput(messages, (usage,) if usage else (), created_at),
                join_step=join_step,
            )

    def append_steps(self, scope: Scope, steps: Iterable[StepInput]) -> int:
        """Append many steps in one transaction (imports), all or nothing; returns entries."""
        with self.atomic() as c:
            return sum(len(self._append_step(c, scope, s, join_step=None)) for s in steps)

    def _append_step(
        self, c: Any, scope: Scope, step: StepInput, *, join_step: int | None
    ) -> list[Entry]:
        if not step.messages:
            raise UserError("a step needs at least one message")
        check_int(join_step=join_step)
        check_step_shape(step.messages, joining=join_step is not None)
        for u in step.usages:
            _check_usage(u)
        next_seq, _status, last_step = self._require(scope, lock=True)
        next_seq = int(next_seq)
        if join_step is not None and last_step != join_step:
            # The latest step is stored with the session: no scan of its entries.
            raise LedgerError(
                f"can only join the latest step ({last_step}) of session {scope.session}, "
                f"not {join_step}"
            )
        step_seq = next_seq if join_step is None else join_step
        created = step.created_at or _now()
        check_text(created_at=created)
        prepared = [prepare(self.counter, m) for m in step.messages]
        rows = []
        for k, p in enumerate(prepared):
            check_text(call_id=p.call_id)
            role = p.message.role.value
            sealed: tuple[Any, ...] = (scope.session, next_seq + k, step_seq, role, p.tokens)
            sealed += (p.size, created)
            sealed += (p.call_id, p.digest, p.output_digest)
            rows.append((*sealed, seal_of("entries", sealed), p.body))
        ids = self._insert_entries(c, rows)
        out = [
            p.entry(ids[k], scope.session, next_seq + k, step_seq, created)
            for k, p in enumerate(prepared)
        ]
        self._index_entries(c, scope, out)
        if step.usages:
            anchor = usage_anchor(out)
            for usage in step.usages:
                self._insert_request(c, scope, anchor.id, usage, created)
        c.execute(
            self._q(
                "UPDATE sessions SET next_seq = ?, entry_count = entry_count + ?,"
                " token_total = token_total + ?, last_step = ? WHERE id = ?"
            ),
            (
                next_seq + len(out),
                len(out),
                sum(p.tokens for p in prepared),
                step_seq,
                scope.session,
            ),
        )
        return out

    def _insert_request(
        self, c: Any, scope: Scope, entry_id: int | None, u: UsageInput, at: str
    ) -> None:
        check_text(model=u.model, protocol=u.protocol)
        meta = u.meta or {}
        run, spent_at, prompt_last_seq = request_facts(meta)
        n = u.usage
        tokens = billed_tokens(n.new_input, n.cache_read, n.cache_write, n.output)
        sealed: tuple[Any, ...] = (scope.session, scope.tenant, entry_id, u.model, u.protocol)
        sealed += (n.new_input,)
        sealed += (n.cache_read, n.cache_write, n.output, n.reasoning, tokens, run, spent_at)
        sealed += (prompt_last_seq, at, canonical_json(meta))
        c.execute(
            self._q(
                f"INSERT INTO requests ({', '.join(SEALED['requests'])}, seal)"
                f" VALUES ({', '.join('?' * (len(sealed) + 1))})"
            ),
            (*sealed, seal_of("requests", sealed)),
        )
        if tokens:
            self._add_spend(c, scope.tenant, run, spent_at, tokens)

    def _add_spend(
        self, c: Any, tenant: str, run: str | None, spent_at: str | None, tokens: int
    ) -> None:
        for table, key, value in (
            ("spend_runs", "run", run),
            ("spend_minutes", "minute", spent_at),
        ):
            if value is None:
                continue
            c.execute(
                self._q(
                    f"INSERT INTO {table} (tenant, {key}, tokens) VALUES (?, ?, ?)"
                    f" ON CONFLICT (tenant, {key}) DO UPDATE SET tokens = {table}.tokens"
                    " + excluded.tokens"
                ),
                (tenant, value if table == "spend_runs" else value[:16], tokens),
            )

    def record_request(self, scope: Scope, entry_id: int | None, usage: UsageInput) -> None:
        _check_usage(usage)
        check_int(entry_id=entry_id)
        with self.atomic() as c:
            self._require(scope)
            if entry_id is not None:
                found = c.execute(
                    self._q("SELECT 1 FROM entries WHERE id = ? AND session_id = ?"),
                    (entry_id, scope.session),
                ).fetchone()
                if found is None:
                    raise UserError(f"entry {entry_id} is not in session {scope.session}")
            self._insert_request(c, scope, entry_id, usage, _now())

    def token_total(self, scope: Scope) -> int:
        info = self.session(scope)
        return info.tokens if info else 0

    # -- requests: the per-turn aggregates ------------------------------------------------------
    def requests(self, scope: Scope) -> list[RequestRecord]:
        """Every request of the session, oldest first (a whole-session read: not per turn)."""
        return self._requests("session_id = ?", (scope.session,), scope, "id")

    def _requests(
        self, where: str, args: Sequence[Any], scope: Scope, order: str, limit: int | None = None
    ) -> list[RequestRecord]:
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                self._q(
                    f"SELECT {COLUMNS['requests']} FROM requests WHERE {where} ORDER BY {order}"
                    + ("" if limit is None else f" LIMIT {int(limit)}")
                ),
                tuple(args),
            ).fetchall()
        return [request_from_row(r) for r in rows]

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
                    self._q("SELECT tokens FROM spend_runs WHERE tenant = ? AND run = ?"),
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
                    self._q(
                        "SELECT (SELECT coalesce(sum(tokens), 0) FROM spend_minutes"
                        " WHERE tenant = ? AND minute > ?), (SELECT coalesce(sum(tokens), 0)"
                        " FROM requests WHERE tenant = ? AND spent_at >= ? AND spent_at < ?)"
                    ),
                    (tenant, minute, tenant, start, boundary or "A"),
                ).fetchone()
                return int(row[0]) + int(row[1])
            row = c.execute(
                self._q(
                    "SELECT coalesce(sum(tokens), 0) FROM requests"
                    " WHERE tenant = ? AND run = ? AND spent_at >= ?"
                ),
                (tenant, run, start),
            ).fetchone()
        return int(row[0])

    def usage_totals(self, scope: Scope, *, run: str | None = None) -> dict[str, int | None]:
        """Per TOK-1 field, the sum over the session's requests (of ``run`` only, if given);
        ``None`` where nothing was reported; ``requests`` counts them."""
        where, args = "session_id = ?", [scope.session]
        if run is not None:
            if not storable(run):
                return {"requests": 0, **dict.fromkeys(_USAGE_FIELDS)}
            where, args = "tenant = ? AND run = ? AND session_id = ?", [scope.tenant, run, *args]
        sums = ", ".join(f"sum({f})" for f in _USAGE_FIELDS)
        with self._reading() as c:
            if not self._visible(scope):
                return {"requests": 0, **dict.fromkeys(_USAGE_FIELDS)}
            row = c.execute(
                self._q(f"SELECT count(*), {sums} FROM requests WHERE {where}"), tuple(args)
            ).fetchone()
        values = [None if v is None else int(v) for v in row[1:]]
        return {"requests": int(row[0]), **dict(zip(_USAGE_FIELDS, values, strict=True))}

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

    # -- deletion ---------------------------------------------------------------------------------
    def delete_session(
        self, scope: Scope, *, by: str | None = None, children: bool = False
    ) -> Deletion:
        """Remove every row of the session in one transaction and leave a tombstone.

        Gone: its entries (and their full-text rows), requests, checkpoints, records (receipts,
        summaries, events, preparations) and its rows in any later table keyed by
        ``session_id``. Kept: a :class:`Deletion` in ``deletions`` naming the session, ``by``
        (who asked), when, how many rows of each table went and a digest of their digests and
        seals, so the deletion is recorded and ``verify`` stays clean. A session with child
        sessions is refused (:class:`SessionHasChildren`) unless ``children=True``, which
        deletes its descendants first, each with its own tombstone. This is the only deletion
        the ledger has; compaction never deletes (LED-1).
        """
        check_text(deleted_by=by)
        with self.atomic() as c:
            self._require(scope, lock=True)
            return self._delete(c, scope.session, by, children)

    def _delete(self, c: Any, sid: str, by: str | None, children: bool) -> Deletion:
        kids = [
            r[0]
            for r in c.execute(
                self._q("SELECT id FROM sessions WHERE parent = ? ORDER BY created_at, id"), (sid,)
            ).fetchall()
        ]
        if kids and not children:
            raise SessionHasChildren(
                f"session {sid} has {len(kids)} child session(s) ({', '.join(kids[:3])}"
                f"{', ...' if len(kids) > 3 else ''}); delete them first, or pass children=True "
                "(`comal rm` asks before it does)"
            )
        for kid in kids:
            self._delete(c, kid, by, True)
        info = c.execute(
            self._q(
                "SELECT tenant, agent, parent, title, created_at, token_total FROM sessions"
                " WHERE id = ?"
            ),
            (sid,),
        ).fetchone()
        removed: dict[str, list[list[Any]]] = {}
        for table, cols in (
            ("entries", "seal, digest"),
            ("requests", "seal"),
            ("checkpoints", "seal, digest"),
            ("records", "seal, digest"),
        ):
            rows = c.execute(
                self._q(f"SELECT {cols} FROM {table} WHERE session_id = ? ORDER BY id"), (sid,)
            ).fetchall()
            removed[table] = [list(r) for r in rows]
        counts = {table: len(rows) for table, rows in removed.items()}
        for extra in self._session_tables(c):
            if extra not in OWN_TABLES:
                cur = c.execute(self._q(f"DELETE FROM {extra} WHERE session_id = ?"), (sid,))
                counts[extra] = max(cur.rowcount, 0)
        self._forget_text(c, sid)
        self._remove_spend(c, sid)
        for table in ("requests", "records", "checkpoints", "entries"):
            c.execute(self._q(f"DELETE FROM {table} WHERE session_id = ?"), (sid,))
        c.execute(self._q("DELETE FROM sessions WHERE id = ?"), (sid,))
        tenant, agent, parent, title, created_at, tokens = info
        tokens = tokens if whole(tokens) else 0  # a damaged counter must not block deletion
        sealed: tuple[Any, ...] = (sid, tenant, agent, parent, title, created_at, _now(), by)
        sealed += (counts["entries"],)
        sealed += (int(tokens), canonical_json(counts), sha256_hex(canonical_json(removed)))
        new = c.execute(
            self._q(
                f"INSERT INTO deletions ({', '.join(SEALED['deletions'])}, seal)"
                f" VALUES ({', '.join('?' * (len(sealed) + 1))}) RETURNING id"
            ),
            (*sealed, seal_of("deletions", sealed)),
        ).fetchone()
        log.info("ledger: session %s deleted (%d entries)", sid, counts["entries"])
        return Deletion(
            int(new[0]),
            sid,
            tenant,
            agent,
            parent,
            title,
            created_at,
            sealed[6],
            by,
            counts["entries"],
            int(tokens),
            counts,
            sealed[11],
        )

    def _remove_spend(self, c: Any, sid: str) -> None:
        """A deleted session's requests leave the running totals, as they leave the ledger."""
        for table, key, column in (
            ("spend_runs", "run", "run"),
            ("spend_minutes", "minute", "substr(spent_at, 1, 16)"),
        ):
            rows = c.execute(
                self._q(
                    f"SELECT tenant, {column}, sum(tokens) FROM requests WHERE session_id = ?"
                    f" AND {column} IS NOT NULL AND tenant IS NOT NULL GROUP BY tenant, {column}"
                ),
                (sid,),
            ).fetchall()
            for tenant, value, tokens in rows:
                c.execute(
                    self._q(
                        f"UPDATE {table} SET tokens = tokens - ? WHERE tenant = ? AND {key} = ?"
                    ),
                    (int(tokens), tenant, value),
                )
            c.execute(self._q(f"DELETE FROM {table} WHERE tokens = 0"))

    def _spend_mismatches(self) -> list[tuple[str, str, str, int, int]]:
        """(table, tenant, key, expected, stored) where a running total disagrees with the
        requests it sums (verify)."""
        found: list[tuple[str, str, str, int, int]] = []
        with self._reading() as c:
            for table, key, expected in (
                ("spend_runs", "run", SPEND_RUNS),
                ("spend_minutes", "minute", SPEND_MINUTES),
            ):
                want = {(r[0], r[1]): int(r[2]) for r in c.execute(expected).fetchall()}
                have = {
                    (r[0], r[1]): r[2] if whole(r[2]) else -1
                    for r in c.execute(f"SELECT tenant, {key}, tokens FROM {table}").fetchall()
                }
                for k in sorted(set(want) | set(have), key=repr):
                    if want.get(k, 0) != have.get(k, 0):
                        found.append((table, str(k[0]), str(k[1]), want.get(k, 0), have.get(k, 0)))
        return found

    def deletions(self, *, tenant: str | None = None) -> list[Deletion]:
        """The tombstones of deleted sessions, oldest first (operator listing)."""
        where, args = "1 = 1", []
        if tenant is not None:
            if not storable(tenant):
                return []
            where, args = "tenant = ?", [tenant]
        with self._reading() as c:
            rows = c.execute(
                self._q(f"SELECT {COLUMNS['deletions']} FROM deletions WHERE {where} ORDER BY id"),
                tuple(args),
            ).fetchall()
        return [deletion_from_row(r) for r in rows]

    # -- raw access for verify ------------------------------------------------------------------
    def _raw_entries(self) -> Iterator[tuple[Any, ...]]:
        """Every entry row (``COLUMNS["entries"]``) by session and seq, in keyset pages."""
        after: tuple[str, int] = ("", -1)
        while True:
            with self._reading() as c, self._lenient():
                rows = c.execute(
                    self._q(
                        f"SELECT {COLUMNS['entries']} FROM entries WHERE (session_id, seq) > (?, ?)"
                        " ORDER BY session_id, seq LIMIT 500"
                    ),
                    after,
                ).fetchall()
            yield from rows
            if len(rows) < 500:
                return
            after = (rows[-1][0], rows[-1][1])

    def _raw_table(self, table: str) -> Iterator[tuple[Any, ...]]:
        """Every row of ``table`` (``COLUMNS[table]``) by id, in keyset pages.

        Read leniently: text that is not valid UTF-8 (a damaged row) comes back with its bad
        bytes as surrogates, so its digest or seal fails and verify names the row, instead of
        the whole walk stopping there.
        """
        id_col = "id"
        after: Any = "" if table == "sessions" else -1
        while True:
            with self._reading() as c, self._lenient():
                rows = c.execute(
                    self._q(
                        f"SELECT {COLUMNS[table]} FROM {table} WHERE {id_col} > ?"
                        f" ORDER BY {id_col} LIMIT 500"
                    ),
                    (after,),
                ).fetchall()
            yield from rows
            if len(rows) < 500:
                return
            after = rows[-1][0] if table == "sessions" else rows[-1][len(SEALED[table]) + 1]

    def _raw_request_refs(self) -> list[tuple[Any, ...]]:
        """Requests whose entry is missing or another session's: (id, session, entry_id)."""
        with self._reading() as c:
            rows: list[tuple[Any, ...]] = c.execute(
                "SELECT r.id, r.session_id, r.entry_id FROM requests r"
                " LEFT JOIN entries e ON e.id = r.entry_id WHERE r.entry_id IS NOT NULL"
                " AND (e.id IS NULL OR e.session_id <> r.session_id) ORDER BY r.id"
            ).fetchall()
        return rows


def _check_usage(u: UsageInput) -> None:
    if not isinstance(u, UsageInput):
        raise UserError(f"usage must be a UsageInput, not {type(u).__name__}")
    for name in _USAGE_FIELDS:
        value = getattr(u.usage, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT
        ):
            raise UserError(
                f"usage {name} must be a whole number 0..2**63-1 or None, not {value!r}"
            )
