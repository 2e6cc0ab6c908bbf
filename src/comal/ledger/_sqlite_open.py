"""Opening an SQLite ledger file, and naming what went wrong when it cannot be.

The order matters: look at the path (missing, a directory, not a regular file, not an SQLite
header) before SQLite touches it; open it without ``create`` unless the caller may create; read
its tables and refuse a stranger's database before the first write (``journal_mode = WAL``
rewrites the header, a migration adds tables). Every ``sqlite3`` error becomes a coded
:class:`~comal.errors.LedgerError` through :func:`translate`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from ..errors import LedgerError
from ._db import Db
from ._dialect import Dialect
from ._errors import (
    LedgerBusy,
    LedgerCorrupt,
    LedgerIsADirectory,
    LedgerNotADatabase,
    LedgerNotFound,
    LedgerReadOnly,
    LedgerTimeout,
    LedgerUnavailable,
)
from ._migrate import migrate, pending
from ._schema import MIGRATIONS, SCHEMA_VERSION
from ._seal import Keying

_HEADER = b"SQLite format 3\x00"
_WRITABLE = "make the ledger file and its directory writable by this user, or point --ledger at a "
_WRITABLE += "writable place"


def translate(exc: sqlite3.Error | UnicodeDecodeError, target: str, doing: str) -> LedgerError:
    """A coded error for a ``sqlite3`` failure while ``doing`` something with ``target``.

    A ``UnicodeDecodeError`` is SQLite reporting a damaged name: the driver could not even
    decode its error message.
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return LedgerCorrupt(
            target,
            f"the database file is damaged (SQLite named something not in UTF-8) while {doing}",
            "run `comal verify` to see where, and restore the ledger from a backup",
        )
    if name == "SQLITE_INTERRUPT":  # only the progress handler of Db.bounded interrupts
        return LedgerTimeout(
            target,
            f"the query ran past the time bound it was given while {doing}",
            "narrow it (more specific words, a phrase, a smaller limit) and try again",
        )
    if name.startswith("SQLITE_READONLY") or "readonly" in text:
        why = (
            "the directory is read-only, and SQLite must create the ledger's -wal and -shm files "
            "beside it even to read"
            if name == "SQLITE_READONLY_DIRECTORY"
            else f"the ledger is read-only ({text})"
        )
        return LedgerReadOnly(target, f"cannot write while {doing}: {why}", _WRITABLE)
    if name.startswith("SQLITE_CORRUPT") or "malformed" in text:
        return LedgerCorrupt(
            target,
            f"the database file is damaged ({text}) while {doing}",
            "run `comal verify` to see where, and restore the ledger from a backup (sqlite3's "
            "`.recover` may salvage rows)",
        )
    if "Could not decode to UTF-8" in text:
        return LedgerCorrupt(
            target,
            f"a stored text is not valid UTF-8 while {doing}: a row was changed outside comal",
            "run `comal verify` to find it, and restore the ledger from a backup",
        )
    if text.startswith(("no such column", "no such table")):
        return LedgerCorrupt(
            target,
            f"the ledger's schema is not the one comal wrote ({text}) while {doing}",
            "run `comal verify`, and restore the ledger from a backup",
        )
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return LedgerNotADatabase(
            target, "this file is not an SQLite database", "check the path (or COMAL_LEDGER)"
        )
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        return LedgerBusy(
            target,
            f"another process held the ledger's write lock too long while {doing} ({text})",
            "wait for the other comal process to finish (or stop it) and retry",
        )
    if name.startswith("SQLITE_FULL"):
        return LedgerUnavailable(target, f"the disk is full while {doing}", "free space and retry")
    if name.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return LedgerUnavailable(
            target,
            f"cannot use the ledger file while {doing} ({text})",
            "check the disk, the path and its permissions",
        )
    return LedgerError(
        f"{target}: {doing} failed ({type(exc).__name__}: {text}); run `comal verify`, and report "
        "it if the ledger is sound"
    )


def open_sqlite(path: str, dialect: Dialect, *, create: bool, target: str, keying: Keying) -> Db:
    """A connection to a migrated comal ledger at ``path`` (``:memory:`` allowed).

    ``create`` allows making the file (and its directory) when it is missing or empty; without
    it nothing is created and a missing ledger is :class:`LedgerNotFound`.
    """
    if path == ":memory:":
        db = Db(
            sqlite3.connect(path, isolation_level=None, check_same_thread=False), dialect, target
        )
        migrate(db, keying)
        return db
    p = Path(path)
    empty = _look(p, create=create, target=target)
    if empty and create:
        _make_private(p, target)
    mode = "rwc" if empty and create else "rw"
    uri = f"file:{quote(os.path.abspath(p))}?mode={mode}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise translate(exc, target, "opening") from exc
    db = Db(conn, dialect, target)
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        found = pending(db)
        if found is None and not create:
            raise LedgerNotFound(
                target,
                "this database is empty: there is no ledger in it yet",
                "check the path (or COMAL_LEDGER); commands that write create a ledger",
            )
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        if found != []:
            _migrate(db, keying, found)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        conn.close()
        raise translate(exc, target, "opening") from exc
    except BaseException:
        conn.close()
        raise
    return db


def _migrate(db: Db, keying: Keying, found: list[str] | None) -> None:
    try:
        migrate(db, keying, found)
    except LedgerReadOnly as err:
        names = found if found is not None else [m.name for m in MIGRATIONS]
        raise LedgerReadOnly(
            db.target,
            f"the ledger needs migrating to schema {SCHEMA_VERSION} ({', '.join(names)}), which "
            "writes, and it is read-only",
            "open it once where it is writable (or with the comal that wrote it)",
        ) from err


def _look(p: Path, *, create: bool, target: str) -> bool:
    """Check the path before SQLite sees it; True when there is no database there yet."""
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError as exc:
        raise LedgerNotFound(
            target, "a parent of this path is a file, not a directory", "check the path"
        ) from exc
    except OSError as exc:
        raise LedgerUnavailable(
            target, f"cannot look at the path ({exc.strerror})", "check its permissions"
        ) from exc
    if st is None:
        if not create:
            raise LedgerNotFound(
                target,
                "no ledger here",
                "check the path (or COMAL_LEDGER); commands that write create a ledger, "
                "reading ones never do",
            )
        _make_parent(p, target)
        return True
    if stat.S_ISDIR(st.st_mode):
        raise LedgerIsADirectory(
            target, "this is a directory, not a ledger file", f"name a file, e.g. {p / 'ledger.db'}"
        )
    if not stat.S_ISREG(st.st_mode):
        raise LedgerNotADatabase(
            target, "this is not a regular file (a device, pipe or socket)", "name a ledger file"
        )
    try:
        with open(p, "rb") as f:
            header = f.read(len(_HEADER))
    except PermissionError as exc:
        raise LedgerUnavailable(
            target, "cannot read the file (permission denied)", "check its permissions"
        ) from exc
    except OSError as exc:
        raise LedgerUnavailable(
            target, f"cannot read the file ({exc.strerror})", "check the disk and the path"
        ) from exc
    if not header:
        return True
    if header != _HEADER:
        raise LedgerNotADatabase(
            target,
            "this file is not an SQLite database (it was left untouched)",
            "check the path (or COMAL_LEDGER), or give a new file name to start a ledger",
        )
    return False


def _make_private(p: Path, target: str) -> None:
    """Create the ledger's file readable by its owner only, before SQLite opens it: it holds
    whole transcripts (keys, tokens, code), and SQLite gives the -wal and -shm files it makes
    beside a database the database's own mode."""
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return  # made meanwhile (another process), or there and empty: its mode is kept
    except OSError as exc:
        raise LedgerReadOnly(
            target, f"cannot create the ledger file ({exc.strerror})", _WRITABLE
        ) from exc


def _make_parent(p: Path, target: str) -> None:
    parent = p.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise LedgerNotFound(
            target, f"{parent} is a file, not a directory", "choose another path"
        ) from exc
    except OSError as exc:
        raise LedgerReadOnly(
            target, f"cannot create the directory {parent} ({exc.strerror})", _WRITABLE
        ) from exc
    if not os.access(parent, os.W_OK | os.X_OK):
        raise LedgerReadOnly(
            target,
            f"the directory {parent} is not writable, so no ledger can be created in it",
            _WRITABLE,
        )
