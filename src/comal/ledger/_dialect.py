"""The dialect seam: everything SQLite and PostgreSQL do differently, named in one place.

The store writes each statement once, with ``?`` placeholders, and runs it through
:class:`~comal.ledger._db.Db`, which asks the dialect for the rest: the placeholder itself, how a
write transaction starts, how rows are locked, which covering index a budget read names, the DDL
types of the migrations, and the parts that are not SQL a backend shares at all (full-text search,
the database's own integrity check, writer serialization by name, the session lock). Both speak
``RETURNING``, ``ON CONFLICT``, row-value comparisons and savepoints, so those need no naming.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..errors import LedgerError
    from ._db import Db
    from ._model import Scope


class Dialect(ABC):
    name: str
    placeholder: str
    begin: str  # the statement that opens a write transaction
    for_update: str  # appended to a SELECT to lock the rows it reads until commit
    budget_index: str  # names the covering index of budget reads where the planner needs telling
    lazy_cursor: bool  # whether a cursor fetches rows only as they are read
    packs_bodies: bool  # whether large bodies are stored as zstd frames (see _bodies)
    errors: tuple[type[BaseException], ...]  # what the driver raises; leaves as a LedgerError
    # The DDL spellings of the migrations' {tokens} (see _schema).
    types: ClassVar[Mapping[str, str]]
    place: str  # what holds a ledger, for messages: an SQLite database, a PostgreSQL schema
    # What an INSERT giving its own ids says before VALUES (PostgreSQL's ids are GENERATED ALWAYS).
    overriding: str = ""
    foreign_todo: str  # what to do about another program's tables where the ledger would go

    def q(self, sql: str) -> str:
        """``sql`` written with ``?`` in this dialect (shared SQL never holds a literal ``?``)."""
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)

    def ddl(self, template: str) -> str:
        return template.format_map(self.types)

    @abstractmethod
    def translate(self, exc: BaseException, target: str, doing: str) -> LedgerError:
        """A coded error for a driver failure while ``doing`` something with ``target``."""

    @abstractmethod
    def in_transaction(self, raw: Any) -> bool: ...

    def broken(self, raw: Any) -> bool:
        """Whether the connection is gone (its server restarted): then it cannot be used again."""
        return False

    @abstractmethod
    def run_script(self, db: Db, sql: str) -> None:
        """Run several DDL statements inside the caller's transaction."""

    @abstractmethod
    def tables(self, db: Db) -> set[str]:
        """The tables (and views) the ledger's schema holds."""

    @abstractmethod
    def columns(self, db: Db, table: str) -> set[str]: ...

    def version(self, db: Db) -> int:
        """The schema version the database records beside its migrations (SQLite's
        ``user_version``), or 0."""
        return 0

    @abstractmethod
    def ids_column(self, table: str, n: int) -> str:
        """A column expression that yields ``n`` new ids of ``table`` (read by :meth:`ids_of`),
        for a write transaction's SELECT: a row's seal covers its id, so the id is known before
        the row is written."""

    @abstractmethod
    def ids_of(self, value: Any, n: int) -> list[int]:
        """The ``n`` ids, ascending, from the value of :meth:`ids_column`."""

    def new_ids(self, db: Db, table: str, n: int) -> list[int]:
        """``n`` ids for rows about to be inserted into ``table`` in the current transaction."""
        return self.ids_of(db.execute(f"SELECT {self.ids_column(table, n)}").fetchone()[0], n)

    @abstractmethod
    def session_tables(self, db: Db) -> list[str]:
        """Tables with a ``session_id`` column: a deleted session's rows go from all of them."""

    def lenient(self, raw: Any) -> AbstractContextManager[None]:
        """Within: text that is not valid UTF-8 decodes with its bad bytes kept as surrogates."""
        return nullcontext()

    @abstractmethod
    def lock_migrations(self, db: Db) -> None:
        """Make concurrent migrators of one ledger take turns (inside the migration's write)."""

    @abstractmethod
    def migrated(self, db: Db, applied: int) -> None:
        """After a migration, inside its transaction: ``applied`` migrations are recorded."""

    @abstractmethod
    def exclusive(self, db: Db, name: str) -> None:
        """Serialize writers of ``name`` until the current transaction ends."""

    # -- time bounds (Db.bounded) --------------------------------------------------------------
    @abstractmethod
    def arm(self, db: Db, deadline: float) -> None:
        """Have the database cut off statements once ``time.monotonic()`` passes ``deadline``
        (the connection's lock is held until :meth:`disarm`)."""

    @abstractmethod
    def disarm(self, db: Db) -> None:
        """Take the bound :meth:`arm` installed off the connection; never raises."""

    # -- full-text search (LED-5) --------------------------------------------------------------
    @abstractmethod
    def index_text(
        self, db: Db, table: str, session: str, texts: Iterable[tuple[int, str]]
    ) -> None:
        """Index (row id, text) pairs in ``table`` (entries_fts, summaries_fts for summary
        records, summaries_text_fts for the dag's summaries) inside the writing transaction;
        ``texts`` may be lazy, and is not consumed where nothing is indexed. The entries'
        index may trail them instead: SQLite's past a high-water mark, PostgreSQL's from a
        queue; either way a search indexes what it reads first."""

    @abstractmethod
    def ranked(
        self, db: Db, table: str, scope: Scope, query: str, limit: int
    ) -> list[tuple[int, float]]:
        """(row id, score: higher is better) of the session's rows of ``table`` matching an
        FTS5-syntax ``query``, best first."""

    @abstractmethod
    def ranked_agent(
        self,
        db: Db,
        table: str,
        tenant: str,
        agent: str,
        query: str,
        limit: int,
        *,
        exclude: str | None,
        budget_s: float,
    ) -> list[tuple[int, float]]:
        """(row id, score: higher is better) of one agent's rows of ``table`` — memories_fts,
        or entries_fts for the entries of every session of (``tenant``, ``agent``) but
        ``exclude`` — matching an FTS5-syntax ``query``, best first (MEM-2). A query still
        running after ``budget_s`` seconds is cancelled:
        :class:`~comal.ledger.MemorySearchTimeout`."""

    @abstractmethod
    def forget_text(self, db: Db, session: str) -> None:
        """Take a session's rows out of the full-text indexes (inside the deleting write)."""

    @abstractmethod
    def rebuild_search_index(self, db: Db) -> None: ...

    @abstractmethod
    def search_check(self, db: Db) -> list[str]:
        """How the full-text indexes differ from the stored text they index."""

    @abstractmethod
    def database_check(self, db: Db) -> tuple[str, list[str]]:
        """The database's own integrity check: (status, problems)."""


def lock_key(text: str) -> int:
    """A signed 64-bit advisory-lock key for ``text`` (PostgreSQL's lock space is bigint)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def insert_many(
    db: Db, statement: str, row: str, rows: Sequence[tuple[Any, ...]], batch: int = 1000
) -> list[tuple[Any, ...]]:
    """Multi-row INSERTs (``statement`` holds ``{}`` where the ``row`` groups go), one round trip
    per ``batch`` rows; returns what a RETURNING clause gives."""
    returned: list[tuple[Any, ...]] = []
    for k in range(0, len(rows), batch):
        chunk = rows[k : k + batch]
        cur = db.execute(_multi_row(statement, row, len(chunk)), list(chain.from_iterable(chunk)))
        if cur.description is not None:
            returned += cur.fetchall()
    return returned


@lru_cache(maxsize=256)
def _multi_row(statement: str, row: str, n: int) -> str:
    # Appends insert a step's few rows each time: the statement text is made once per size.
    return statement.format(", ".join([row] * n))
