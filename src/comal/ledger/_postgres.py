"""The PostgreSQL ledger (LED-4 scale-out): the same interface and semantics as SQLite's.

Open one with ``open_ledger("postgresql://user:password@host/db")`` or construct
:class:`PostgresLedger` with a ``schema`` to keep several ledgers in one database. Writers on
different machines may share a ledger: appends lock their session row, so sequences stay dense.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import LedgerError, UserError
from ..messages import Message, canonical_json, message_to_json, sha256_hex
from ..tokens import count_message
from ._common import check_step_shape, prepare, session_from_row, usage_anchor
from ._model import STATUSES, CheckpointRecord, Entry, Record, RecordTable, Scope, SessionInfo
from ._postgres_reads import Conn, _PgReads
from ._postgres_schema import check_text, search_vectors, storable
from ._sqlite_base import StepInput, UsageInput, _now
from ._summaries_pg import PgSummaries


class PostgresLedger(PgSummaries, _PgReads):
    """Append-only store over one psycopg connection. Synchronous by design, like SQLite's:
    async callers cross to a thread at their edge.

    ``schema`` names the PostgreSQL schema holding the tables (created if missing); without it
    the connection's ``search_path`` decides (normally ``public``).
    """

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
        created_at: str | None = None,
    ) -> Scope:
        scope = Scope(tenant, agent, session_id or str(uuid.uuid4()))
        check_text(
            tenant=tenant,
            agent=agent,
            session=scope.session,
            parent=parent,
            title=title,
            source=source,
            created_at=created_at,
        )
        with self.atomic() as c:
            if parent is not None:
                row = c.execute(
                    "SELECT 1 FROM sessions WHERE id = %s AND tenant = %s", (parent, tenant)
                ).fetchone()
                if row is None:
                    raise UserError(f"parent session {parent} not found for tenant {tenant!r}")
            # ON CONFLICT keeps the transaction usable, so an outer atomic() survives a clash.
            inserted = c.execute(
                "INSERT INTO sessions (id, tenant, agent, parent, created_at, title, source, meta)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
                (
                    scope.session,
                    tenant,
                    agent,
                    parent,
                    created_at or _now(),
                    title,
                    source,
                    canonical_json(meta or {}),
                ),
            ).fetchone()
            if inserted is None:
                raise UserError(f"session {scope.session} already exists")
        return scope

    def session(self, scope: Scope) -> SessionInfo | None:
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return None
        rows = self._session_query(
            "s.id = %s AND s.tenant = %s AND s.agent = %s",
            (scope.session, scope.tenant, scope.agent),
        )
        return rows[0] if rows else None

    def sessions(self, *, tenant: str | None = None, agent: str | None = None) -> list[SessionInfo]:
        """Operator listing, optionally narrowed to a tenant and agent."""
        where, args = ["TRUE"], []
        for column, value in (("tenant", tenant), ("agent", agent)):
            if value is not None:
                if not storable(value):
                    return []
                where.append(f"s.{column} = %s")
                args.append(value)
        return self._session_query(" AND ".join(where), args)

    def resolve(self, session_prefix: str) -> Scope:
        """Operator lookup: the full scope of the session whose id starts with the prefix."""
        if not session_prefix:
            raise UserError("empty session id")
        rows: list[tuple[Any, ...]] = []
        if storable(session_prefix):
            with self._reading() as c:
                # The "C" collation makes this a byte-wise prefix range on the primary key.
                rows = c.execute(
                    "SELECT tenant, agent, id FROM sessions WHERE id >= %s AND id < %s LIMIT 2",
                    (session_prefix, session_prefix + "\U0010ffff"),
                ).fetchall()
        if not rows:
            raise UserError(
                f"no session matches {session_prefix!r}; list them with `comal sessions`"
            )
        if len(rows) > 1:
            raise UserError(f"session prefix {session_prefix!r} is ambiguous; give more characters")
        return Scope(*rows[0])

    def children(self, scope: Scope) -> list[SessionInfo]:
        if not self._visible(scope):
            return []
        return self._session_query("s.parent = %s AND s.tenant = %s", (scope.session, scope.tenant))

    def set_status(self, scope: Scope, status: str) -> None:
        if status not in STATUSES:
            raise UserError(f"status must be one of {STATUSES}, not {status!r}")
        with self.atomic() as c:
            if self._session_row(scope, lock=True) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            c.execute("UPDATE sessions SET status = %s WHERE id = %s", (status, scope.session))

    def _session_query(self, where: str, args: Sequence[Any]) -> list[SessionInfo]:
        with self._reading() as c:
            rows = c.execute(
                "SELECT s.id, s.tenant, s.agent, s.parent, s.status, s.title, s.source,"
                " s.created_at, s.entry_count, s.token_total, s.meta FROM sessions s"
                f" WHERE {where} ORDER BY s.created_at, s.id",
                tuple(args),
            ).fetchall()
        return [session_from_row(r) for r in rows]

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
        self, c: Conn, scope: Scope, step: StepInput, *, join_step: int | None
    ) -> list[Entry]:
        if not step.messages:
            raise UserError("a step needs at least one message")
        check_step_shape(step.messages, joining=join_step is not None)
        row = self._session_row(scope, lock=True)
        if row is None:
            raise UserError(f"no session {scope.session} in this tenant/agent; create it first")
        next_seq = int(row[0])
        if join_step is not None:
            # Steps grow with seq, so the newest entry's step is the latest step.
            last = c.execute(
                "SELECT step FROM entries WHERE session_id = %s ORDER BY seq DESC LIMIT 1",
                (scope.session,),
            ).fetchone()
            if last is None or last[0] != join_step:
                raise LedgerError(
                    f"can only join the latest step ({last[0] if last else None}) of session "
                    f"{scope.session}, not {join_step}"
                )
        step_seq = next_seq if join_step is None else join_step
        created = step.created_at or _now()
        prepared = [prepare(self.counter, m) for m in step.messages]
        check_text(created_at=created)
        for p in prepared:
            check_text(call_id=p.call_id)
        rows = [
            (
                scope.session,
                next_seq + k,
                step_seq,
                p.message.role.value,
                p.tokens,
                p.size,
                created,
                p.call_id,
                p.digest,
                p.output_digest,
                p.body,
            )
            for k, p in enumerate(prepared)
        ]
        ids = dict(
            _insert_rows(
                c,
                "INSERT INTO entries (session_id, seq, step, role, tokens, size, created_at,"
                " call_id, digest, output_digest, body) VALUES {} RETURNING seq, id",
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
        )
        out = [
            p.entry(ids[next_seq + k], scope.session, next_seq + k, step_seq, created)
            for k, p in enumerate(prepared)
        ]
        self._index_text(c, "entries_fts", scope, [(e.id, e.message.text) for e in out])
        if step.usages:
            anchor = usage_anchor(out)
            for usage in step.usages:
                self._insert_request(c, scope, anchor.id, usage, created)
        c.execute(
            "UPDATE sessions SET next_seq = %s, entry_count = entry_count + %s,"
            " token_total = token_total + %s WHERE id = %s",
            (next_seq + len(out), len(out), sum(p.tokens for p in prepared), scope.session),
        )
        return out

    def _index_text(
        self, c: Conn, table: str, scope: Scope, texts: Sequence[tuple[int, str]]
    ) -> None:
        rows = [
            (ref, k, scope.session, vector)
            for ref, text in texts
            for k, vector in enumerate(search_vectors(text))
        ]
        ref_column = "entry_id" if table == "entries_fts" else "record_id"
        _insert_rows(
            c,
            f"INSERT INTO {table} ({ref_column}, chunk, session_id, tsv) VALUES {{}}",
            "(%s, %s, %s, %s::tsvector)",
            rows,
        )

    def _insert_request(
        self, c: Conn, scope: Scope, entry_id: int | None, u: UsageInput, at: str
    ) -> None:
        check_text(model=u.model, protocol=u.protocol)
        c.execute(
            "INSERT INTO requests (session_id, entry_id, model, protocol, new_input, cache_read,"
            " cache_write, output, reasoning, created_at, meta)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                scope.session,
                entry_id,
                u.model,
                u.protocol,
                u.usage.new_input,
                u.usage.cache_read,
                u.usage.cache_write,
                u.usage.output,
                u.usage.reasoning,
                at,
                canonical_json(u.meta or {}),
            ),
        )

    def record_request(self, scope: Scope, entry_id: int | None, usage: UsageInput) -> None:
        with self.atomic() as c:
            if self._session_row(scope) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            self._insert_request(c, scope, entry_id, usage, _now())

    def token_total(self, scope: Scope) -> int:
        info = self.session(scope)
        return info.tokens if info else 0

    # -- checkpoints, receipts, summaries, events ---------------------------------------------
    def add_checkpoint(
        self,
        scope: Scope,
        message: Message,
        *,
        first_seq: int,
        last_seq: int,
        meta: dict[str, Any] | None = None,
    ) -> CheckpointRecord:
        body = message_to_json(message)
        tokens = count_message(self.counter, message)
        digest = sha256_hex(body)
        created = _now()
        with self.atomic() as c:
            row = self._session_row(scope)
            if row is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            if not 0 <= first_seq <= last_seq < int(row[0]):
                raise UserError(
                    f"checkpoint range {first_seq}..{last_seq} is outside the session's "
                    f"entries 0..{int(row[0]) - 1}"
                )
            new = c.execute(
                "INSERT INTO checkpoints (session_id, first_seq, last_seq, tokens, created_at,"
                " digest, body, meta) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    scope.session,
                    first_seq,
                    last_seq,
                    tokens,
                    created,
                    digest,
                    body,
                    canonical_json(meta or {}),
                ),
            ).fetchone()
        assert new is not None
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

    def add_record(
        self,
        scope: Scope,
        table: RecordTable,
        kind: str,
        body: dict[str, Any],
    ) -> Record:
        text = canonical_json(body)
        digest = sha256_hex(text)
        created = _now()
        check_text(kind=kind)
        with self.atomic() as c:
            if self._session_row(scope) is None:
                raise UserError(f"no session {scope.session} in this tenant/agent")
            new = c.execute(
                "INSERT INTO records (session_id, table_name, kind, created_at, digest, body)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (scope.session, table, kind, created, digest, text),
            ).fetchone()
            assert new is not None
            rid = int(new[0])
            if table == "summary" and isinstance(body.get("text"), str):
                self._index_text(c, "summaries_fts", scope, [(rid, body["text"])])
        return Record(rid, scope.session, kind, created, digest, body)


def _insert_rows(
    c: Conn, statement: str, row: str, rows: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """Multi-row INSERTs, one round trip per thousand rows; returns any RETURNING rows."""
    returned: list[tuple[Any, ...]] = []
    for k in range(0, len(rows), 1000):
        batch = rows[k : k + 1000]
        cur = c.execute(
            statement.format(", ".join([row] * len(batch))), [v for r in batch for v in r]
        )
        if cur.description is not None:
            returned += cur.fetchall()
    return returned
