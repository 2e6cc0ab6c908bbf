"""The ledger's semantics written once, over a :class:`~comal.ledger._sql.Dialect`.

Sessions, appends, requests, checkpoints, records, deletions and the per-turn aggregates are the
same statements on SQLite and PostgreSQL; a backend supplies its connection (``atomic`` and
``_reading``), how a batch of entries is inserted, and what its full-text index needs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..errors import LedgerError, UserError
from ..messages import Message, canonical_json, group_messages
from ._common import check_step_shape, prepare, usage_anchor
from ._core_admin import _Admin
from ._core_records import _Records
from ._model import (
    STATUSES,
    Entry,
    RequestRecord,
    Scope,
    SessionInfo,
)
from ._rows import (
    COLUMNS,
    SEALED,
    billed_tokens,
    check_identifier,
    check_seal,
    damaged_index,
    request_facts,
    request_from_row,
    seal_of,
    session_from_row,
    utc_text,
)
from ._savings import request_saving
from ._sqlite_base import StepInput, UsageInput, _now
from ._text import check_int, check_text, storable

ENTRY_INSERT = (
    "INSERT INTO entries (session_id, seq, step, role, tokens, size, created_at, call_id, digest,"
    " output_digest, seal, body)"
)
_MAX_INT = 2**63 - 1
_USAGE_FIELDS = ("new_input", "cache_read", "cache_write", "output", "reasoning")


class _Core(_Records, _Admin):
    """The ledger's semantics, shared by both backends: sessions, appends and requests here,
    checkpoints and records in ``_core_records``, deletion and verify's walks in
    ``_core_admin``, scoping in ``_core_base``."""

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
        # Priced once, here, so no report ever re-prices the log (see _savings.py).
        saved = request_saving(meta, u.model, n.new_input, n.cache_read, n.cache_write)
        c.execute(
            self._q(
                f"INSERT INTO requests ({', '.join(SEALED['requests'])}, seal, saved_usd)"
                f" VALUES ({', '.join('?' * (len(sealed) + 2))})"
            ),
            (*sealed, seal_of("requests", sealed), saved),
        )
        c.execute(
            self._q(
                "UPDATE sessions SET request_count = request_count + 1, saved_usd = CASE"
                " WHEN ? THEN coalesce(saved_usd, 0) + ? ELSE saved_usd END WHERE id = ?"
            ),
            (saved is not None, saved or 0.0, scope.session),
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

    def usage_by_model(self, scope: Scope) -> list[tuple[str | None, str | None, dict[str, Any]]]:
        """The session's usage per (model, protocol): ``requests`` and the sum of each TOK-1
        field (``None`` where nothing was reported), aggregated in the query, so pricing a
        session reads one row per model rather than every request."""
        sums = ", ".join(f"sum({f})" for f in _USAGE_FIELDS)
        with self._reading() as c:
            if not self._visible(scope):
                return []
            rows = c.execute(
                self._q(
                    f"SELECT model, protocol, count(*), {sums} FROM requests"
                    " WHERE session_id = ? GROUP BY model, protocol ORDER BY min(id)"
                ),
                (scope.session,),
            ).fetchall()
        out: list[tuple[str | None, str | None, dict[str, Any]]] = []
        for model, protocol, count, *values in rows:
            fields = {
                f: None if v is None else int(v) for f, v in zip(_USAGE_FIELDS, values, strict=True)
            }
            out.append((model, protocol, {"requests": int(count), **fields}))
        return out


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
