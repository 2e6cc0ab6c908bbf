"""The session lock of a PostgreSQL ledger (RES-2, SCL-1): an advisory lock plus a lease row
with expiry and heartbeat, so it holds across hosts and a dead holder's lock ends and is
recorded.

The lock is held on a connection of its own:

- a session-level **advisory lock**, which the server drops the instant that connection ends
  (the holder's process died and its socket closed);
- a row in ``session_locks``: owner, host, pid, the server pid of its connection, and an
  expiry pushed forward by a **heartbeat** thread every third of the TTL, on the server's clock
  (hosts need not agree on the time).

Acquiring when the advisory lock is free but a row is left means the previous holder ended
without releasing (killed): its row is the *stale* holder the caller records. When the
advisory lock is held but the row has expired, the holder stopped beating while its
connection stayed open (a frozen or cut-off host whose socket the server has not given up on
yet): its connection is terminated, which frees the advisory lock, and the row is stale in the
same way. While the row is fresh the session is :class:`SessionLocked`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from typing import Any

from ..errors import LedgerError
from ._dialect import lock_key
from ._errors import SessionLocked
from ._locks import _Scoped

__all__ = ["DEFAULT_TTL_S", "PgSessionLock", "pg_lock_holder"]

DEFAULT_TTL_S = 30.0
_NOW = "extract(epoch from clock_timestamp())::float8"


def pg_lock_holder(execute: Any, key: int, session: str) -> dict[str, Any] | None:
    """Who holds the advisory lock ``key`` now (its lease row's owner, host and pid), read
    without taking it; ``None`` when nobody does. ``execute`` runs a statement with ``?``
    placeholders on a ledger connection whose search path holds ``session_locks``."""
    found = execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND classid = ? AND objid = ?",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    ).fetchone()
    if found is None:
        return None
    row = execute(
        "SELECT owner, host, pid FROM session_locks WHERE session = ?", (session,)
    ).fetchone()
    if row is None:
        return {"advisory_lock": key}
    return {"owner": row[0], "host": row[1], "pid": row[2]}


class PgSessionLock(_Scoped):
    """``with PgSessionLock(url, session, schema=...) as lock: ...``; ``lock.stale`` is the row a
    dead holder left, with ``"cleared"`` saying how it was found dead."""

    def __init__(
        self,
        url: str,
        session: str,
        *,
        namespace: str = "",
        schema: str | None = None,
        ttl: float = DEFAULT_TTL_S,
    ) -> None:
        self.url = url
        self.session = session
        self.key = lock_key(f"comal:{namespace}:{session}")
        self.schema = schema
        self.ttl = float(ttl)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.stale: dict[str, Any] | None = None
        self.lost = False  # the heartbeat found the row gone or taken: the lock was lost
        self._conn: Any = None
        self._guard = threading.Lock()  # the heartbeat and release share the connection
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    @property
    def _table(self) -> str:
        if self.schema is None:
            return "session_locks"
        return '"' + self.schema.replace('"', '""') + '".session_locks'

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(self) -> dict[str, Any] | None:
        """Take the lock or raise :class:`SessionLocked`; returns the stale holder cleared."""
        import psycopg

        try:
            conn = psycopg.connect(self.url, autocommit=True)
        except psycopg.Error as exc:
            raise self._failed(exc) from exc
        try:
            stale = self._take(conn)
        except psycopg.Error as exc:
            conn.close()
            raise self._failed(exc) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self.stale = stale
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="comal-lock", daemon=True)
        self._beat.start()
        return stale

    def _take(self, conn: Any) -> dict[str, Any] | None:
        import psycopg

        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()[0]
        row = self._row(conn)
        cleared = "its connection ended without a release (the process died)"
        if not got:
            # Only an expired holder's own connection is ended, never a newer holder's.
            if (
                row is None
                or row["expires_at"] > row["now"]
                or self._holder(conn) != row["backend_pid"]
            ):
                raise self._locked(row)
            # Expired while its connection lives on: end that connection, then take the lock.
            conn.execute("SELECT pg_terminate_backend(%s)", (row["backend_pid"],))
            conn.execute("SET lock_timeout = '10s'")
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
            except psycopg.errors.LockNotAvailable:
                raise self._locked(row) from None
            ago = row["now"] - row["expires_at"]
            cleared = f"its heartbeat stopped: its lease had expired {ago:.1f} s before"
        conn.execute(
            f"INSERT INTO {self._table} (session, owner, host, pid, backend_pid, acquired_at,"
            f" heartbeat_at, expires_at) VALUES (%s, %s, %s, %s, pg_backend_pid(), {_NOW},"
            f" {_NOW}, {_NOW} + %s) ON CONFLICT (session) DO UPDATE SET owner = excluded.owner,"
            " host = excluded.host, pid = excluded.pid, backend_pid = excluded.backend_pid,"
            " acquired_at = excluded.acquired_at, heartbeat_at = excluded.heartbeat_at,"
            " expires_at = excluded.expires_at",
            (self.session, self.owner, socket.gethostname(), os.getpid(), self.ttl),
        )
        if row is None:
            return None
        return {k: row[k] for k in ("owner", "host", "pid", "acquired_at", "heartbeat_at")} | {
            "expires_at": row["expires_at"],
            "cleared": cleared,
        }

    def _holder(self, conn: Any) -> int | None:
        """The server pid of the connection holding this session's advisory lock (a bigint key
        is kept as two 32-bit halves in ``pg_locks``)."""
        found = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s AND objid = %s",
            ((self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF),
        ).fetchone()
        return None if found is None else int(found[0])

    def _row(self, conn: Any) -> dict[str, Any] | None:
        found = conn.execute(
            f"SELECT owner, host, pid, backend_pid, acquired_at, heartbeat_at, expires_at, {_NOW}"
            f" FROM {self._table} WHERE session = %s",
            (self.session,),
        ).fetchone()
        if found is None:
            return None
        names = ("owner", "host", "pid", "backend_pid", "acquired_at", "heartbeat_at")
        return dict(zip((*names, "expires_at", "now"), found, strict=True))

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            with self._guard:
                conn = self._conn
                if conn is None:
                    return
                try:
                    cur = conn.execute(
                        f"UPDATE {self._table} SET heartbeat_at = {_NOW},"
                        f" expires_at = {_NOW} + %s WHERE session = %s AND owner = %s",
                        (self.ttl, self.session, self.owner),
                    )
                except Exception:  # the connection is gone: so is the advisory lock
                    self.lost = True
                    return
                if cur.rowcount != 1:
                    self.lost = True
                    return

    def release(self) -> None:
        """Give the lock up: the row first, then the advisory lock (nothing when not held)."""
        self._stop.set()
        with self._guard:
            conn, self._conn = self._conn, None
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
        if conn is None:
            return
        with contextlib.suppress(Exception):
            conn.execute(
                f"DELETE FROM {self._table} WHERE session = %s AND owner = %s",
                (self.session, self.owner),
            )
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        conn.close()

    def _failed(self, exc: BaseException) -> LedgerError:
        """A driver error as the ledger's own coded one (a server away is LedgerUnavailable),
        without the password."""
        from ._postgres_open import translate
        from ._target import parse_target

        parsed = parse_target(self.url)
        return translate(exc, parsed.described, parsed.password, "taking the session lock")

    def _locked(self, row: dict[str, Any] | None) -> SessionLocked:
        if row is None:
            who = f"another process (PostgreSQL advisory lock {self.key})"
            holder: dict[str, Any] = {"advisory_lock": self.key}
        else:
            left = row["expires_at"] - row["now"]
            who = f"pid {row['pid']} on {row['host']} (its lease runs {left:.0f} s more)"
            holder = {k: row[k] for k in ("owner", "host", "pid")}
        return SessionLocked(
            f"session {self.session} is in use by {who}; wait for it to finish or stop that "
            "process, then resume",
            holder=holder,
        )
