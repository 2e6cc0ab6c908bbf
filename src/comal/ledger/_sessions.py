"""Sessions and appends: the writes every turn makes, one transaction per step.

An append locks its session's row, reads ``next_seq`` and the chain's ``head`` from it (no scan
of the entries), checks the head against its seal, seals each new entry over the one before it,
and moves the head on, all in the step's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ..errors import LedgerError, UserError
from ..messages import Message, canonical_json, group_messages
from . import _ledger_head as ledger_head
from ._common import Prepared, check_step_shape, prepare, prepare_many, usage_anchor
from ._db import Db
from ._dialect import insert_many
from ._model import STATUSES, Entry, Scope, SessionInfo, SessionPage
from ._rows import (
    COLUMNS,
    HEAD,
    SEALED,
    billed_tokens,
    check_head,
    check_identifier,
    check_seal,
    damaged_index,
    request_facts,
    seal_row,
    session_from_row,
    utc_text,
)
from ._savings import request_saving
from ._store import StepInput, StoreBase, UsageInput, now
from ._text import check_int, check_text, storable

_MAX_INT = 2**63 - 1
USAGE_FIELDS = ("new_input", "cache_read", "cache_write", "output", "reasoning")
_ENTRY_MARKS = f"({', '.join('?' * (len(SEALED['entries']) + 3))})"
# {0}: the dialect's clause for rows that bring their own ids; {{}}: the rows.
_ENTRY_INSERT = (
    f"INSERT INTO entries (id, {', '.join(SEALED['entries'])}, seal, body){{0}} VALUES {{{{}}}}"
)


class Sessions(StoreBase):
    """Sessions, appends and the requests recorded with them."""

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
        when = now() if created_at is None else utc_text(created_at)
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
                    "SELECT 1 FROM sessions WHERE id = ? AND tenant = ?", (parent, tenant)
                ).fetchone()
                if row is None:
                    raise UserError(f"parent session {parent} not found for tenant {tenant!r}")
            # ON CONFLICT keeps the transaction usable, so an outer atomic() survives a clash.
            seals = (
                self._sealer.seal("sessions", values),
                self._sealer.seal(HEAD, (scope.session, 0, None)),
            )
            inserted = c.execute(
                "INSERT INTO sessions (id, tenant, agent, parent, status, created_at, title,"
                " source, meta, seal, head_seal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                (*values, *seals),
            ).fetchone()
            if inserted is None:
                raise UserError(f"session {scope.session} already exists")
            for group in group_messages(messages):
                self._append_step(c, scope, StepInput(group.messages), join_step=None)
            # Last: on PostgreSQL the ledger's head is one row, held until this commits.
            ledger_head.advance(c, self._sealer, self._ledger_id, added=[scope.session])
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

    def session_page(
        self,
        *,
        tenant: str | None = None,
        agent: str | None = None,
        since: str | datetime | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> SessionPage:
        """Sessions newest first (started at ``since`` or later), ``limit`` of them from
        ``offset`` (None: all), with how many match in all.

        Only the page's rows are read and checked: a listing costs the same for ten sessions
        or a hundred thousand (the count reads no row's body).
        """
        check_int(limit=limit, offset=offset)
        if (limit is not None and limit < 0) or offset < 0:
            raise UserError(f"limit and offset are 0 or more, not {limit!r} and {offset!r}")
        where, args = ["1 = 1"], []
        for column, value in (("tenant", tenant), ("agent", agent)):
            if value is not None:
                if not storable(value):
                    return SessionPage([], 0, offset)
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            start = utc_text(since)
            if start is None:
                raise UserError(f"since {since!r} is not an ISO time such as 2025-01-31T12:00Z")
            where.append("created_at >= ?")  # fixed-width UTC text: text order is time order
            args.append(start)
        clause = " AND ".join(where)
        page = f"{clause} ORDER BY created_at DESC, id DESC"
        page += "" if limit is None else f" LIMIT {int(limit)}"
        page += f" OFFSET {int(offset)}" if offset else ""
        with self._reading() as c:
            total = c.execute(f"SELECT COUNT(*) FROM sessions WHERE {clause}", tuple(args))
            count = int(total.fetchone()[0])
            rows = c.execute(
                f"SELECT {COLUMNS['sessions']} FROM sessions WHERE {page}", tuple(args)
            ).fetchall()
        return SessionPage([session_from_row(self._sealer, r) for r in rows], count, offset)

    def _session_query(self, where: str, args: Sequence[Any]) -> list[SessionInfo]:
        rows = self._select("sessions", where, args, "created_at, id")
        return [session_from_row(self._sealer, r) for r in rows]

    def resolve(self, session_prefix: str) -> Scope:
        """Operator lookup: the full scope of the session whose id starts with the prefix."""
        if not session_prefix:
            raise UserError("empty session id")
        rows: list[tuple[Any, ...]] = []
        if storable(session_prefix):
            with self._reading() as c:
                # Byte-wise prefix range on the primary key (PostgreSQL keys use the C collation).
                rows = c.execute(
                    "SELECT tenant, agent, id FROM sessions WHERE id >= ? AND id < ? LIMIT 2",
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

    def _reseal_session(self, c: Db, scope: Scope, **changes: Any) -> None:
        self._require(scope, lock=True)
        row = c.execute(
            f"SELECT {COLUMNS['sessions']} FROM sessions WHERE id = ?", (scope.session,)
        ).fetchone()
        # Resealing a damaged row would launder the damage: check it first.
        check_seal(self._sealer, "sessions", row, row[0], row[0])
        cols = SEALED["sessions"]
        values = list(row[: len(cols)])
        for name, value in changes.items():
            values[cols.index(name)] = value
        sets = ", ".join(f"{name} = ?" for name in changes)
        c.execute(
            f"UPDATE sessions SET {sets}, seal = ? WHERE id = ?",
            (*changes.values(), self._sealer.seal("sessions", values), scope.session),
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
        step = StepInput(messages, (usage,) if usage else (), created_at)
        # Checked and prepared (encoded, counted, compressed) before the write lock is taken:
        # most of an append's work is there, and other writers need not wait for it.
        prepared = self._prepare([step], join_step)
        with self.atomic() as c:
            return self._append_many(c, scope, [step], join_step, prepared)[0]

    def append_steps(self, scope: Scope, steps: Iterable[StepInput]) -> int:
        """Append many steps in one transaction (imports), all or nothing; returns entries."""
        batch = list(steps)
        prepared = self._prepare(batch, None)
        with self.atomic() as c:
            return sum(len(out) for out in self._append_many(c, scope, batch, None, prepared))

    def _append_step(
        self, c: Db, scope: Scope, step: StepInput, *, join_step: int | None
    ) -> list[Entry]:
        return self._append_many(c, scope, [step], join_step, self._prepare([step], join_step))[0]

    def _prepare(self, steps: Sequence[StepInput], join_step: int | None) -> list[Prepared]:
        """The steps' messages checked and prepared to store (no database work)."""
        check_int(join_step=join_step)
        for step in steps:
            if not step.messages:
                raise UserError("a step needs at least one message")
            check_step_shape(step.messages, joining=join_step is not None)
            for u in step.usages:
                _check_usage(u)
            if step.created_at is not None:
                check_text(created_at=step.created_at)
        messages = [m for step in steps for m in step.messages]
        if len(steps) > 1 and self._packs:
            return prepare_many(self.counter, messages, packs=True)
        return [prepare(self.counter, m, packs=self._packs) for m in messages]

    def _append_many(
        self,
        c: Db,
        scope: Scope,
        steps: Sequence[StepInput],
        join_step: int | None,
        prepared: Sequence[Prepared],
    ) -> list[list[Entry]]:
        """Steps (checked and prepared by :meth:`_prepare`) appended in the caller's
        transaction: the session's row is read and moved on once for all of them, and their
        entries go in by multi-row INSERTs."""
        if not steps:
            return []
        found = self._require(scope, lock=True, ids=("entries", len(prepared)))
        next_seq, _status, last_step, head, head_seal, new_ids = found
        if self._heads.get(scope.session) != (next_seq, head, head_seal):
            check_head(self._sealer, scope.session, next_seq, head, head_seal)
        next_seq = int(next_seq)
        if join_step is not None and last_step != join_step:
            # The latest step is stored with the session: no scan of its entries.
            raise LedgerError(
                f"can only join the latest step ({last_step}) of session {scope.session}, "
                f"not {join_step}"
            )
        stamp = now()
        rows, placed = [], []  # placed: (first seq, step seq, created, its prepared messages)
        ids = iter(new_ids)
        k = 0
        for step in steps:
            mine = prepared[k : k + len(step.messages)]
            k += len(mine)
            step_seq = next_seq if join_step is None else join_step
            created = step.created_at or stamp
            for i, p in enumerate(mine):
                check_text(call_id=p.call_id)
                sealed: tuple[Any, ...] = (scope.session, next_seq + i, step_seq)
                sealed += (p.message.role.value, p.tokens, p.size, created, p.call_id)
                sealed += (p.digest, p.output_digest, head)
                row_id = next(ids)
                head = seal_row(self._sealer, "entries", sealed, row_id)  # the next prev_seal
                rows.append((row_id, *sealed, head, p.stored))
            placed.append((next_seq, step_seq, created, mine))
            next_seq += len(mine)
            last_step = step_seq
        insert_many(c, _ENTRY_INSERT.format(self._dialect.overriding), _ENTRY_MARKS, rows)
        by_seq = {r[2]: r[0] for r in rows}
        out = [
            [
                p.entry(by_seq[first + i], scope.session, first + i, seq, at)
                for i, p in enumerate(mine)
            ]
            for first, seq, at, mine in placed
        ]
        texts = ((e.id, e.message.text) for step_out in out for e in step_out)
        self._dialect.index_text(c, "entries_fts", scope.session, texts)
        for step, step_out, (_, _, created, _) in zip(steps, out, placed, strict=True):
            if step.usages:
                anchor = usage_anchor(step_out)
                for usage in step.usages:
                    self._insert_request(c, scope, anchor.id, usage, created)
        self._move_head(c, scope, next_seq, head, last_step, prepared)
        return out

    def _move_head(
        self,
        c: Db,
        scope: Scope,
        end: int,
        head: str,
        last_step: int,
        prepared: Sequence[Prepared],
    ) -> None:
        head_seal = self._sealer.seal(HEAD, (scope.session, end, head))
        if len(self._heads) > 4096:
            self._heads.clear()
        # The head this store sealed: finding it unchanged, the next append needs no check.
        self._heads[scope.session] = (end, head, head_seal)
        c.execute(
            "UPDATE sessions SET next_seq = ?, entry_count = entry_count + ?,"
            " token_total = token_total + ?, last_step = ?, head = ?, head_seal = ? WHERE id = ?",
            (
                end,
                len(prepared),
                sum(p.tokens for p in prepared),
                last_step,
                head,
                head_seal,
                scope.session,
            ),
        )

    def _insert_request(
        self, c: Db, scope: Scope, entry_id: int | None, u: UsageInput, at: str
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
        (rid,) = self._dialect.new_ids(c, "requests", 1)
        c.execute(
            f"INSERT INTO requests (id, {', '.join(SEALED['requests'])}, seal, saved_usd)"
            f"{self._dialect.overriding} VALUES ({', '.join('?' * (len(sealed) + 3))})",
            (rid, *sealed, seal_row(self._sealer, "requests", sealed, rid), saved),
        )
        c.execute(
            "UPDATE sessions SET request_count = request_count + 1, saved_usd = CASE"
            " WHEN ? THEN coalesce(saved_usd, 0) + ? ELSE saved_usd END WHERE id = ?",
            (saved is not None, saved or 0.0, scope.session),
        )
        if tokens:
            self._add_spend(c, scope.tenant, run, spent_at, tokens)

    def _add_spend(
        self, c: Db, tenant: str, run: str | None, spent_at: str | None, tokens: int
    ) -> None:
        for table, key, value in (
            ("spend_runs", "run", run),
            ("spend_minutes", "minute", spent_at),
        ):
            if value is None:
                continue
            c.execute(
                f"INSERT INTO {table} (tenant, {key}, tokens) VALUES (?, ?, ?)"
                f" ON CONFLICT (tenant, {key}) DO UPDATE SET tokens = {table}.tokens"
                " + excluded.tokens",
                (tenant, value if table == "spend_runs" else value[:16], tokens),
            )

    def record_request(self, scope: Scope, entry_id: int | None, usage: UsageInput) -> None:
        _check_usage(usage)
        check_int(entry_id=entry_id)
        with self.atomic() as c:
            self._require(scope)
            if entry_id is not None:
                found = c.execute(
                    "SELECT 1 FROM entries WHERE id = ? AND session_id = ?",
                    (entry_id, scope.session),
                ).fetchone()
                if found is None:
                    raise UserError(f"entry {entry_id} is not in session {scope.session}")
            self._insert_request(c, scope, entry_id, usage, now())

    def token_total(self, scope: Scope) -> int:
        info = self.session(scope)
        return info.tokens if info else 0


def _check_usage(u: UsageInput) -> None:
    if not isinstance(u, UsageInput):
        raise UserError(f"usage must be a UsageInput, not {type(u).__name__}")
    for name in USAGE_FIELDS:
        value = getattr(u.usage, name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_INT
        ):
            raise UserError(
                f"usage {name} must be a whole number 0..2**63-1 or None, not {value!r}"
            )
