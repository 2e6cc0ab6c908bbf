"""The embedded SQLite ledger (LED-4): WAL, foreign keys, one transaction per step."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from ..errors import LedgerError, UserError
from ..messages import Message, canonical_json
from ._common import check_step_shape, prepare, session_from_row, usage_anchor
from ._model import (
    STATUSES,
    Entry,
    Scope,
    SessionInfo,
)
from ._sqlite_base import StepInput, UsageInput, _now
from ._sqlite_reads import _Reads
from ._summaries import SqliteSummaries

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class SQLiteLedger(SqliteSummaries, _Reads):
    """Append-only store. Synchronous by design: async callers cross to a thread at their edge.

    One connection per instance, guarded by a lock so a ledger can be shared by threads.
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
        with self.atomic() as c:
            if parent is not None:
                row = c.execute(
                    "SELECT 1 FROM sessions WHERE id = ? AND tenant = ?", (parent, tenant)
                ).fetchone()
                if row is None:
                    raise UserError(f"parent session {parent} not found for tenant {tenant!r}")
            try:
                c.execute(
                    "INSERT INTO sessions (id, tenant, agent, parent, created_at, title, source,"
                    " meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
                )
            except sqlite3.IntegrityError as exc:
                raise UserError(f"session {scope.session} already exists") from exc
        return scope

    def session(self, scope: Scope) -> SessionInfo | None:
        rows = self._session_query("s.id = ? AND s.tenant = ? AND s.agent = ?", scope)
        return rows[0] if rows else None

    def sessions(self, *, tenant: str | None = None, agent: str | None = None) -> list[SessionInfo]:
        """Operator listing, optionally narrowed to a tenant and agent."""
        where, args = ["1 = 1"], []
        if tenant is not None:
            where.append("s.tenant = ?")
            args.append(tenant)
        if agent is not None:
            where.append("s.agent = ?")
            args.append(agent)
        return self._session_query(" AND ".join(where), args)

    def resolve(self, session_prefix: str) -> Scope:
        """Operator lookup: the full scope of the session whose id starts with the prefix."""
        if not session_prefix:
            raise UserError("empty session id")
        with self._lock:
            rows = self._conn.execute(
                "SELECT tenant, agent, id FROM sessions WHERE id >= ? AND id < ? LIMIT 2",
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
        return self._session_query("s.parent = ? AND s.tenant = ?", [scope.session, scope.tenant])

    def set_status(self, scope: Scope, status: str) -> None:
        if status not in STATUSES:
            raise UserError(f"status must be one of {STATUSES}, not {status!r}")
        with self.atomic() as c:
            cur = c.execute(
                "UPDATE sessions SET status = ? WHERE id = ? AND tenant = ? AND agent = ?",
                (status, scope.session, scope.tenant, scope.agent),
            )
            if cur.rowcount != 1:
                raise UserError(f"no session {scope.session} in this tenant/agent")

    def _session_query(self, where: str, args: Sequence[Any] | Scope) -> list[SessionInfo]:
        if isinstance(args, Scope):
            args = (args.session, args.tenant, args.agent)
        with self._lock:
            rows = self._conn.execute(
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
        self, c: sqlite3.Connection, scope: Scope, step: StepInput, *, join_step: int | None
    ) -> list[Entry]:
        if not step.messages:
            raise UserError("a step needs at least one message")
        check_step_shape(step.messages, joining=join_step is not None)
        row = self._session_row(scope)
        if row is None:
            raise UserError(f"no session {scope.session} in this tenant/agent; create it first")
        next_seq = int(row[0])
        if join_step is not None:
            last = c.execute(
                "SELECT max(step) FROM entries WHERE session_id = ?", (scope.session,)
            ).fetchone()[0]
            if last != join_step:
                raise LedgerError(
                    f"can only join the latest step ({last}) of session {scope.session}, "
                    f"not {join_step}"
                )
        step_seq = next_seq if join_step is None else join_step
        created = step.created_at or _now()
        out: list[Entry] = []
        total_tokens = 0
        for offset, msg in enumerate(step.messages):
            seq = next_seq + offset
            p = prepare(self.counter, msg)
            total_tokens += p.tokens
            cur = c.execute(
                "INSERT INTO entries (session_id, seq, step, role, tokens, size, created_at,"
                " call_id, digest, output_digest, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    scope.session,
                    seq,
                    step_seq,
                    msg.role.value,
                    p.tokens,
                    p.size,
                    created,
                    p.call_id,
                    p.digest,
                    p.output_digest,
                    p.body,
                ),
            )
            out.append(p.entry(int(cur.lastrowid or 0), scope.session, seq, step_seq, created))
        if step.usages:
            anchor = usage_anchor(out)
            for usage in step.usages:
                self._insert_request(c, scope, anchor.id, usage, created)
        c.execute(
            "UPDATE sessions SET next_seq = ?, entry_count = entry_count + ?,"
            " token_total = token_total + ? WHERE id = ?",
            (next_seq + len(out), len(out), total_tokens, scope.session),
        )
        return out

    def _insert_request(
        self, c: sqlite3.Connection, scope: Scope, entry_id: int | None, u: UsageInput, at: str
    ) -> None:
        c.execute(
            "INSERT INTO requests (session_id, entry_id, model, protocol, new_input, cache_read,"
            " cache_write, output, reasoning, created_at, meta) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
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
