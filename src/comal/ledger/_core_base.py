"""The base of the shared ledger core: the hooks a backend supplies, and scope resolution."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..tokens import TokenCounter, default_counter
from ._model import Entry, Scope, log
from ._rows import damaged_index, whole
from ._sql import Dialect
from ._text import storable


class _CoreBase:
    """What every part of the core shares: the backend's hooks, the dialect, the scope check.

    Every read takes a Scope and reads nothing when it does not resolve (LED-2).
    """

    _counter: TokenCounter | None

    @property
    def counter(self) -> TokenCounter:
        """The counter appends price entries with; the default one (loading the tiktoken
        tables, over half a second) is made on first use, so a ledger opened to read never
        pays for it."""
        if self._counter is None:
            self._counter = default_counter()
        return self._counter

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
