"""What every part of the store shares: its connection, dialect and sealer, tracing, writer
serialization by name, and the scope check every read and write starts with (LED-2)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from ..errors import LedgerError, UserError
from ..messages import Message
from ..tokens import TokenCounter, Usage, default_counter
from . import _ledger_head as ledger_head
from ._bodies import pack
from ._db import Db, Tracer
from ._errors import LedgerRolledBack, LedgerRowDamaged
from ._model import Entry, Fault, Scope, log
from ._rollback import Seen, load, observe, remember, state_path, why_older
from ._rows import COLUMNS, damaged_index, whole
from ._seal import Keying, Sealer, find_sealer, is_ledger_id
from ._text import storable


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class UsageInput:
    """Usage measured for the model call that produced a step's assistant message."""

    usage: Usage
    model: str | None = None
    protocol: str | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class StepInput:
    messages: Sequence[Message]
    usages: Sequence[UsageInput] = ()
    created_at: str | None = None


class EntryCache:
    """Decoded entries by id, bounded by their stored body size (least recently used first).

    Safe because entries are append-only: an id always names the same bytes.
    """

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[int, Entry] = OrderedDict()
        self._bytes = 0

    def get_many(self, ids: list[int]) -> dict[int, Entry]:
        found: dict[int, Entry] = {}
        for i in ids:
            e = self._items.get(i)
            if e is not None:
                self._items.move_to_end(i)
                found[i] = e
        return found

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0

    def put(self, entry: Entry) -> None:
        if entry.id in self._items or entry.size > self.max_bytes // 8:
            return
        self._items[entry.id] = entry
        self._bytes += entry.size
        while self._bytes > self.max_bytes:
            _, old = self._items.popitem(last=False)
            self._bytes -= old.size


class StoreBase:
    """One connection, one dialect, one sealer; the parts of the store add the semantics."""

    def __init__(self, db: Db, keying: Keying, counter: TokenCounter | None) -> None:
        """Take over ``db`` (open and migrated) and find its secret; ``db`` is closed if that
        fails."""
        try:
            with db.reading():
                meta = dict(db.execute("SELECT name, value FROM ledger_meta").fetchall())
            if keying.made is not None:  # keyed just now, by the migration
                sealer = Sealer(*keying.made, None, db.target)
            else:
                sealer = find_sealer(keying, meta)
            if keying.strict and not sealer.checks:
                # Reading with the seals unchecked would show whatever a writer put there.
                raise sealer.refusal("open it")
        except BaseException:
            db.close()
            raise
        self._db = db
        self._dialect = db.dialect
        self._packs = db.dialect.packs_bodies  # see _bodies; off only to compare sizes
        self._sealer = sealer
        self._counter = counter
        self._cache = EntryCache()
        self._heads: dict[str, tuple[Any, ...]] = {}  # see Sessions._append_step
        self.target = db.target
        self._ledger_id: Any = meta.get("id")
        self._keying = keying
        # What a lenient open (verify) found wrong before any row was read.
        self._opening_faults: list[Fault] = []
        self._rolled_back: tuple[Seen, Seen] | None = None  # (found, seen) when older
        self._wrote = False
        try:
            self._look_back()
        except BaseException:
            db.close()
            raise

    @property
    def counter(self) -> TokenCounter:
        """The counter appends price entries with; the default one (loading the tiktoken
        tables, over half a second) is made on first use, so a ledger opened to read never
        pays for it."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

    @counter.setter
    def counter(self, counter: TokenCounter) -> None:
        self._counter = counter

    def close(self) -> None:
        if self._wrote and self._rolled_back is None:
            self._remember()
        self._db.close()

    # -- what this machine saw (_rollback) ----------------------------------------------------
    def _seen_path(self) -> Path | None:
        place, ledger_id = self._keying.place, self._ledger_id
        if place is None or not self._sealer.checks or not is_ledger_id(ledger_id):
            return None
        return state_path(ledger_id, place)

    def _observe(self) -> Seen:
        with self._reading() as c:
            return observe(c, ledger_head.read(c, self._sealer, self._ledger_id))

    def _look_back(self) -> None:
        """Compare the ledger with what this machine last saw in its place; remember it when
        it is that or newer, refuse it (or, opened leniently, note it) when it is older."""
        path = self._seen_path()
        if path is None:
            return
        try:
            found = self._observe()
        except LedgerRowDamaged:
            if self._keying.strict:
                raise
            return  # verify names the damaged head
        seen = load(path)
        why = None if seen is None else why_older(found, seen)
        if why is None:
            remember(path, found, str(self._keying.place))
            return
        if self._keying.strict:
            raise LedgerRolledBack(
                self.target,
                f"the ledger is older than this machine last saw it here: {why}",
                "if it was restored from a backup on purpose, check and accept it once with "
                "`comal verify --accept-restore`; otherwise put the newer copy back",
            )
        assert seen is not None
        self._rolled_back = (found, seen)
        self._opening_faults.append(Fault(None, None, "rolled-back", why, "ledger", None))

    def _remember(self) -> None:
        path = self._seen_path()
        if path is None:
            return
        try:
            found = self._observe()
        except LedgerError as exc:  # closing: what was seen at open stays recorded
            log.warning("ledger: what this process saw was not recorded (%s)", exc)
            return
        remember(path, found, str(self._keying.place))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def derived(self, purpose: str, text: str) -> str:
        """A value every process holding the ledger's secret derives alike for ``purpose``
        and ``text`` (HMAC-SHA256 under the secret, apart from every seal); a ledger without
        its secret raises :class:`~comal.ledger.LedgerSecretMissing`."""
        return self._sealer.derive(purpose, text)

    def atomic(self) -> AbstractContextManager[Db]:
        """One write transaction; nested calls become savepoints (all or nothing together).

        It yields the connection: ``execute(sql, params)`` runs a statement in it (``?``
        placeholders, or the backend's own) and returns the driver's cursor."""
        self._wrote = True  # closing records what this machine saw (_rollback)
        return self._db.atomic()

    def _stored(self, text: str) -> str | bytes:
        """What a row holds for the body ``text``: compressed where the backend packs."""
        if not self._packs:
            return text
        return pack(text, text.encode("utf-8", "surrogatepass"))

    def bounded(self, seconds: float) -> AbstractContextManager[None]:
        """Within: every statement this thread runs on the ledger ends by ``seconds`` from now,
        cut off by the database itself (SQLite's progress handler, PostgreSQL's
        ``statement_timeout``), and a search's work between statements is checked too; past
        the deadline, :class:`~comal.ledger.LedgerTimeout`. Bounds nest (the earliest wins);
        other threads sharing the connection are not affected."""
        return self._db.bounded(seconds)

    def _reading(self) -> AbstractContextManager[Db]:
        return self._db.reading()

    def _lenient(self) -> AbstractContextManager[None]:
        return self._db.lenient()

    @contextmanager
    def trace(self, callback: Tracer) -> Iterator[None]:
        """While installed, every SQL statement this ledger runs goes to ``callback(sql,
        params)`` first, as the backend receives it (a context manager; tracers nest)."""
        with self._db.trace(callback):
            yield

    def exclusive(self, name: str) -> None:
        """Serialize writers of ``name``, across processes, for the rest of the current
        ``atomic()`` transaction: PostgreSQL takes a transaction-scoped advisory lock; on
        SQLite the transaction holds the database's only write lock from its start."""
        if not isinstance(name, str):
            raise UserError(f"an exclusive() name is text, not {type(name).__name__}")
        if self._db.depth == 0:
            raise UserError("exclusive() serializes the rest of a transaction: call it inside "
                            "atomic()")  # fmt: skip
        self._dialect.exclusive(self._db, name)

    def _select(
        self,
        table: str,
        where: str,
        args: Sequence[Any],
        order: str,
        limit: int | None = None,
        scope: Scope | None = None,
    ) -> list[tuple[Any, ...]]:
        """Rows of ``table`` (its ``COLUMNS``, which its decoder reads); none for a ``scope``
        that does not resolve (LED-2)."""
        sql = f"SELECT {COLUMNS[table]} FROM {table} WHERE {where} ORDER BY {order}"
        with self._reading() as c:
            if scope is not None and not self._visible(scope):
                return []
            rows = c.execute(sql + ("" if limit is None else f" LIMIT {int(limit)}"), tuple(args))
            return list(rows.fetchall())

    # -- scoping ------------------------------------------------------------------------------
    def _session_row(
        self, scope: Scope, *, lock: bool = False, ids: tuple[str, int] | None = None
    ) -> tuple[Any, ...] | None:
        """(next_seq, status, last_step, head, head_seal) of the scope's session, or None when it
        does not resolve. ``lock`` (inside ``atomic``) serializes writers of one session on
        PostgreSQL: the second waits for the first to commit and then reads its next_seq.
        ``ids`` (table, n) adds a sixth value, ``n`` new ids of that table: a write learns the ids
        its seals cover in the statement that finds its session, not in one more."""
        if not all(storable(v) for v in (scope.tenant, scope.agent, scope.session)):
            return None  # no stored session can have such a name
        extra = "" if ids is None else f", {self._dialect.ids_column(*ids)}"
        query = (
            f"SELECT next_seq, status, last_step, head, head_seal{extra} FROM sessions"
            " WHERE id = ? AND tenant = ? AND agent = ?"
        ) + (self._dialect.for_update if lock else "")
        with self._reading() as c:
            row: tuple[Any, ...] | None = c.execute(
                query, (scope.session, scope.tenant, scope.agent)
            ).fetchone()
        if row is not None and not (whole(row[0]) and (row[2] is None or whole(row[2]))):
            raise damaged_index(self.target, f"session {scope.session}'s counters are not numbers")
        if row is not None and ids is not None:
            row = (*row[:5], self._dialect.ids_of(row[5], ids[1]))
        return row

    def _visible(self, scope: Scope) -> bool:
        """LED-2: a scope that does not resolve to a stored session reads as empty."""
        if self._session_row(scope) is None:
            log.warning("ledger read refused: no session %s for tenant/agent", scope.session)
            return False
        return True

    def _require(
        self, scope: Scope, *, lock: bool = False, ids: tuple[str, int] | None = None
    ) -> tuple[Any, ...]:
        row = self._session_row(scope, lock=lock, ids=ids)
        if row is None:
            raise UserError(
                f"no session {scope.session} for tenant {scope.tenant!r} and agent "
                f"{scope.agent!r}; create it first (or list them with `comal sessions`)"
            )
        return row
