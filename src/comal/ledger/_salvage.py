"""What ``verify`` can still say about a ledger that does not open.

A ledger file cut short (a disk that filled, a copy that stopped, ``truncate``) usually does not
open at all: SQLite cannot read the list of its tables, so every command, ``verify`` included,
would stop at the same "damaged" error. ``verify`` exists to say where the damage is, so it
reports instead, never raising:

- the file against its own header: the page size and the number of pages the header says it
  has, against the bytes on disk (a truncated file is missing its last pages), and a file that
  ends mid-page;
- the write-ahead log beside it, when there is one (it may hold pages the file lacks);
- SQLite's own check, read-only, and each ledger table read row by row up to the first page that
  cannot be read, where the list of tables can be read at all.

Nothing here writes: the file is opened read-only (``immutable`` when no log is beside it, so not
even a ``-shm`` file is made). Seals are not checked: that needs the ledger opened with its
secret, and the report says so.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from ..errors import LedgerError
from ._model import Fault, VerifyReport
from ._rows import SEALED
from ._target import parse_target

__all__ = ["verify_unopened"]

_HEADER = b"SQLite format 3\x00"
# How many of SQLite's own findings are kept: a cut file can have thousands, one a page.
_MAX_INTEGRITY = 50


def verify_unopened(target: str, error: LedgerError) -> VerifyReport:
    """The report of a ledger that could not be opened (``error``): every fault found without
    opening it as a ledger, the failure to open first."""
    why = getattr(error, "what", None) or str(error)
    faults = [Fault(None, None, "open", f"the ledger does not open: {why}", "ledger")]
    rows: dict[str, int] = {}
    database = "not checked: the ledger does not open"
    parsed = parse_target(target)
    if parsed.kind == "sqlite" and parsed.value != ":memory:":
        path = Path(parsed.value)
        faults += _file_faults(path)
        database, found = _read_only_checks(path, rows)
        faults += found
    return VerifyReport(
        False,
        rows.get("entries", 0),
        tuple(faults),
        (),
        rows,
        database,
        "not checked: the ledger does not open, so its secret was not looked for",
    )


def _file_faults(path: Path) -> list[Fault]:
    """The file's size against what its header says it holds."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(100)
    except OSError as exc:
        return [Fault(None, None, "file", f"cannot read the file: {exc.strerror}", "database")]
    if len(head) < 100 or not head.startswith(_HEADER):
        return [Fault(None, None, "file", f"the file is {size:,} bytes, shorter than an SQLite "
                      "header: nothing in it can be read", "database")]  # fmt: skip
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is only kept up to date when these two counters agree.
    counted = head[24:28] == head[92:96] and pages > 0
    faults: list[Fault] = []
    if counted and size < pages * page:
        have = size // page
        faults.append(Fault(None, None, "truncated", (
            f"the header says the database has {pages:,} pages of {page:,} bytes "
            f"({pages * page:,} bytes); the file has {size:,} bytes: its last "
            f"{pages - have:,} pages are missing"), "database"))  # fmt: skip
    if page and size % page:
        faults.append(Fault(None, None, "truncated", (
            f"the file ends {size % page:,} bytes into a page of {page:,}: it was cut "
            "mid-write"), "database"))  # fmt: skip
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        faults.append(Fault(None, None, "log", (
            f"a write-ahead log of {wal.stat().st_size:,} bytes is beside it ({wal.name}): it "
            "may hold pages the file lacks; keep it with the file"), "database"))  # fmt: skip
    return faults


def _read_only_checks(path: Path, rows: dict[str, int]) -> tuple[str, list[Fault]]:
    """SQLite's own check and each ledger table read to its first unreadable page."""
    immutable = not Path(f"{path}-wal").exists()
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return "not checked: it does not open read-only", [_fault("database", "open", exc)]
    try:
        return _checks(conn, rows)
    finally:
        conn.close()


def _checks(conn: sqlite3.Connection, rows: dict[str, int]) -> tuple[str, list[Fault]]:
    faults: list[Fault] = []
    try:
        found = [str(r[0]) for r in conn.execute(f"PRAGMA integrity_check({_MAX_INTEGRITY})")]
    except sqlite3.Error as exc:
        found = [f"the check cannot run: {exc}"]
    problems = [p for p in found if p != "ok"]
    faults += [Fault(None, None, "integrity", p, "database") for p in problems]
    try:
        have = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error as exc:
        what = f"the list of tables cannot be read ({exc}), so no table can be read"
        return "faults", [*faults, Fault(None, None, "unreadable", what, "database")]
    for table in SEALED:  # the tables verify checks, in its order
        if table not in have:
            faults.append(Fault(None, None, "missing", "the table is not in the file", table))
            continue
        count = 0
        try:
            # Every column: the table's own pages, not a smaller index SQLite would prefer.
            for _ in conn.execute(f"SELECT * FROM {table}"):
                count += 1
        except sqlite3.Error as exc:
            faults.append(_fault(table, "unreadable", exc, f"stopped after {count:,} rows: "))
        rows[table] = count
    return ("faults" if problems else "ok"), faults


def _fault(table: str, kind: str, exc: sqlite3.Error, before: str = "") -> Fault:
    return Fault(None, None, kind, f"{before}{exc}", table)
