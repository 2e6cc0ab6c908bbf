"""The ledger's coded errors: what was wrong, at which (redacted) target, and what to do.

Every failure of opening, reading or writing a ledger reaches the caller as one of these, never as
a ``sqlite3`` or ``psycopg`` exception: ``code`` is stable, ``target`` is the ledger as
:func:`~comal.ledger.describe_target` prints it (a URL never carries its password), and the
message ends with what to do.
"""

from __future__ import annotations

from typing import Any

from ..errors import LedgerError, LedgerIntegrityError, UserError

__all__ = [
    "BadSearchQuery",
    "InvalidIdentifier",
    "LedgerBadTarget",
    "LedgerBusy",
    "LedgerCorrupt",
    "LedgerForeign",
    "LedgerIsADirectory",
    "LedgerKeyMismatch",
    "LedgerNotADatabase",
    "LedgerNotFound",
    "LedgerReadOnly",
    "LedgerRolledBack",
    "LedgerRowDamaged",
    "LedgerSecretMissing",
    "LedgerTimeout",
    "LedgerUnavailable",
    "MemoryNotFound",
    "MemorySearchTimeout",
    "SearchTooBroad",
    "SessionHasChildren",
    "SessionLocked",
]


class _AtTarget(Exception):
    """Mixin: ``target`` names the ledger; the message is "<target>: <what>; <todo>"."""

    def __init__(self, target: str | None, what: str, todo: str) -> None:
        self.target = target
        self.what = what
        self.todo = todo
        super().__init__(f"{target}: {what}; {todo}" if target else f"{what}; {todo}")


class LedgerNotFound(_AtTarget, LedgerError):
    """No ledger where one was named, and the caller may not create one (``create=False``)."""

    code = "LEDGER_NOT_FOUND"


class LedgerForeign(_AtTarget, LedgerError):
    """A database that is not a comal ledger (another program's): it is left untouched."""

    code = "LEDGER_FOREIGN"


class LedgerNotADatabase(_AtTarget, LedgerError):
    """A file that is not a database at all (or not a regular file)."""

    code = "LEDGER_NOT_A_DATABASE"


class LedgerIsADirectory(_AtTarget, LedgerError):
    code = "LEDGER_IS_A_DIRECTORY"


class LedgerReadOnly(_AtTarget, LedgerError):
    """A write was needed (create, migrate, append) where the file, directory or role is
    read-only."""

    code = "LEDGER_READ_ONLY"


class LedgerUnavailable(_AtTarget, LedgerError):
    """The ledger cannot be reached: a server that refuses, a file that cannot be opened or read,
    a disk that is full or failing."""

    code = "LEDGER_UNAVAILABLE"


class LedgerBusy(_AtTarget, LedgerError):
    """Another process held the ledger's write lock past the busy timeout."""

    code = "LEDGER_BUSY"


class LedgerSecretMissing(_AtTarget, LedgerError):
    """The ledger's secret, which keys its seals, is missing or wrong: nothing can be written
    (and a PostgreSQL ledger cannot be created or migrated) without it."""

    code = "LEDGER_SECRET_MISSING"


class LedgerKeyMismatch(_AtTarget, LedgerIntegrityError):
    """A secret was found for the ledger, but its key check (``ledger_meta``) says the ledger
    was sealed under another one, or its id no longer names a key: the ledger is refused rather
    than read with its seals unchecked (``verify`` still opens it, to report)."""

    code = "LEDGER_KEY_MISMATCH"


class LedgerRolledBack(_AtTarget, LedgerIntegrityError):
    """The ledger is older than this machine last saw it in this place: a whole file (or
    database) put back to an earlier copy. ``comal verify --accept-restore`` accepts a restore
    made on purpose, once, and records it."""

    code = "LEDGER_ROLLED_BACK"


class LedgerTimeout(_AtTarget, LedgerError):
    """A statement ran past the time bound its caller set (``ledger.bounded(seconds)``): the
    database cut it off (SQLite's progress handler, PostgreSQL's ``statement_timeout``) and
    nothing it would have written was kept."""

    code = "LEDGER_TIMEOUT"


class LedgerBadTarget(_AtTarget, UserError):
    """A ledger target that cannot be parsed (a malformed ``postgresql://`` URL)."""

    code = "LEDGER_BAD_TARGET"


class LedgerCorrupt(_AtTarget, LedgerIntegrityError):
    """The database file is malformed, or a stored row does not decode."""

    code = "LEDGER_CORRUPT"


class LedgerRowDamaged(LedgerIntegrityError):
    """A row read back does not match its digest or seal: it was changed outside comal.

    ``table``, ``row`` (id), ``session``, ``field`` (``body`` or ``seal``) and the ``stored`` and
    ``computed`` digests say exactly what failed.
    """

    code = "LEDGER_ROW_DAMAGED"

    def __init__(
        self, table: str, row: object, session: object, field: str, stored: str, computed: str
    ) -> None:
        self.table, self.row, self.session = table, row, session
        self.field, self.stored, self.computed = field, stored, computed
        what = "body does not match its sha256 digest"
        if field != "body":
            what = "row does not match its seal"
        super().__init__(
            f"{table} row {row} of session {session}: {what} (stored {stored}, computed "
            f"{computed}); the ledger was changed outside comal: run `comal verify` and restore "
            "the ledger from a backup"
        )


class InvalidIdentifier(UserError):
    """A tenant, agent or session id that is empty, blank, padded or holds control characters."""

    code = "LEDGER_BAD_ID"


class BadSearchQuery(UserError):
    """A full-text query (``fts=True``) that is not valid FTS5 syntax."""

    code = "SEARCH_SYNTAX"


class SearchTooBroad(UserError):
    """A search refused before it ran: more words, phrases or prefixes than a query may hold,
    whose cost would grow with them (see ``comal.ledger`` search limits)."""

    code = "SEARCH_TOO_BROAD"


class SessionHasChildren(UserError):
    """``delete_session`` of a session with child sessions, without ``children=True``."""

    code = "LEDGER_HAS_CHILDREN"


class SessionLocked(UserError):
    """A live process holds the session's lock; ``holder`` is what its lock says of it."""

    code = "SESSION_LOCKED"

    def __init__(self, message: str, *, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


class MemorySearchTimeout(UserError):
    """A memory search ran past its time budget and was cancelled (nothing is returned rather
    than a ranking of part of the rows)."""

    code = "MEMORY_SEARCH_TIMEOUT"


class MemoryNotFound(UserError):
    """``forget`` of a memory id the agent does not hold (none, or another agent's): nothing
    was recorded."""

    code = "MEMORY_NOT_FOUND"
