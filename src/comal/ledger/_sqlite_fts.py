"""SQLite's full-text indexes: contentless FTS5 tables beside the entries and summaries.

``entries_fts`` trails the entries (``fts_state.upto`` is the highest indexed id);
``summaries_fts`` is written with each summary record. Both hold only postings, so forgetting a
row needs the exact text it indexed, and checking them means indexing the stored text again and
comparing (:func:`search_check`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import load_json, message_from_json, sha256_hex
from ._bodies import unpack
from ._rows import damaged_index

if TYPE_CHECKING:
    from ._db import Db

_TABLES = {"entries_fts": "entries", "summaries_fts": "summaries"}


def fts_text(text: str) -> str:
    # SQLite needs valid UTF-8; a lone surrogate (from surrogateescape-decoded output) becomes
    # U+FFFD in the index only. The stored body keeps it exactly.
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def entry_text(body: str) -> str:
    return message_from_json(body).text


def summary_text(body: str) -> str:
    text = load_json(body).get("text")
    return text if isinstance(text, str) else ""


def indexed_texts(
    rows: Sequence[tuple[Any, ...]], text_of: Callable[[str], str]
) -> tuple[list[tuple[int, str]], int]:
    """(id, index text) of the (id, digest, body) rows that have text, and how many rows were
    skipped because their body fails its digest or does not decode."""
    out: list[tuple[int, str]] = []
    damaged = 0
    for row_id, digest, stored in rows:
        body = unpack(stored)
        try:
            if sha256_hex(body) != digest:
                raise ValueError("digest")
            text = text_of(body)
        except Exception:  # any damage: the row is counted, not indexed
            damaged += 1
            continue
        if text:
            out.append((int(row_id), fts_text(text)))
    return out, damaged


def _summary_rows(c: Db, where: str, args: Sequence[Any]) -> list[tuple[int, str]]:
    rows = c.execute(
        f"SELECT id, digest, body FROM records WHERE table_name = 'summary' AND {where}",
        tuple(args),
    )
    return indexed_texts(rows.fetchall(), summary_text)[0]


def upto(c: Db) -> int:
    row = c.execute("SELECT upto FROM fts_state WHERE name = 'entries'").fetchone()
    if row is None or not isinstance(row[0], int):
        raise damaged_index(None, "the full-text index's high-water mark is gone")
    return row[0]


def forget_session(c: Db, session: str) -> None:
    """Take a session's rows out of both indexes (inside the deleting transaction).

    A body that fails its digest may not be what was indexed: then that index is dropped and
    rebuilt instead (entries lazily, by the next search; summaries at once, without the
    session's).
    """
    rows = c.execute(
        "SELECT id, digest, body FROM entries WHERE session_id = ? AND id <= ?",
        (session, upto(c)),
    ).fetchall()
    texts, damaged = indexed_texts(rows, entry_text)
    if damaged:
        _clear(c, "entries_fts")
        c.execute("UPDATE fts_state SET upto = 0 WHERE name = 'entries'")
    else:
        c.executemany(
            "INSERT INTO entries_fts (entries_fts, rowid, text) VALUES ('delete', ?, ?)", texts
        )
    rows = c.execute(
        "SELECT id, digest, body FROM records WHERE session_id = ? AND table_name = 'summary'",
        (session,),
    ).fetchall()
    found, damaged = indexed_texts(rows, summary_text)
    if damaged:
        _clear(c, "summaries_fts")
        c.executemany(
            "INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)",
            _summary_rows(c, "session_id <> ?", (session,)),
        )
    else:
        c.executemany(
            "INSERT INTO summaries_fts (summaries_fts, rowid, text) VALUES ('delete', ?, ?)", found
        )


def rebuild(c: Db) -> None:
    """Both indexes from scratch: summaries now, entries by the next search."""
    _clear(c, "entries_fts")
    c.execute("UPDATE fts_state SET upto = 0 WHERE name = 'entries'")
    _clear(c, "summaries_fts")
    c.executemany(
        "INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", _summary_rows(c, "1", ())
    )


def _clear(c: Db, table: str) -> None:
    c.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")


def search_check(c: Db) -> list[str]:
    """Index the stored text again in a scratch database and compare the postings.

    The comparison is a few sums over every (term, row, offset) instance of each index, so any
    moved, lost or invented posting shows; walking every instance twice is what makes it slow
    (about 10 s for 20,000 entries, 2.5 million postings).
    """
    problems: list[str] = []
    c.execute("ATTACH ':memory:' AS comal_check")
    try:
        for table in _TABLES:
            c.execute(
                f"CREATE VIRTUAL TABLE comal_check.{table} USING fts5"
                " (text, content='', tokenize='unicode61')"
            )
        high, last = upto(c), 0
        while last < high:  # in pages, so memory stays bounded on a large ledger
            rows = c.execute(
                "SELECT id, digest, body FROM entries WHERE id > ? AND id <= ? ORDER BY id"
                " LIMIT 2000",
                (last, high),
            ).fetchall()
            if not rows:
                break
            last = rows[-1][0]
            c.executemany(
                "INSERT INTO comal_check.entries_fts (rowid, text) VALUES (?, ?)",
                indexed_texts(rows, entry_text)[0],
            )
        c.executemany(
            "INSERT INTO comal_check.summaries_fts (rowid, text) VALUES (?, ?)",
            _summary_rows(c, "1", ()),
        )
        for table in _TABLES:
            stored, fresh = (_sums(c, schema, table) for schema in ("main", "comal_check"))
            if stored != fresh:
                problems.append(
                    f"full-text index {table} does not match the stored text ({stored[0]:,} "
                    f"postings, {fresh[0]:,} expected): rebuild it (rebuild_search_index)"
                )
    finally:
        for table in _TABLES:
            c.execute(f"DROP TABLE IF EXISTS temp.comal_vocab_{table}")
        c.execute("DETACH comal_check")
    return problems


def _sums(c: Db, schema: str, table: str) -> tuple[int, ...]:
    vocab = f"temp.comal_vocab_{table}"
    c.execute(f"DROP TABLE IF EXISTS {vocab}")
    c.execute(f"CREATE VIRTUAL TABLE {vocab} USING fts5vocab({schema}, {table}, 'instance')")
    row = c.execute(
        "SELECT count(*), coalesce(sum(doc), 0), coalesce(sum(doc * (offset + 1)), 0),"
        " coalesce(sum(length(term) * (doc + offset)), 0), coalesce(sum(unicode(term) * doc), 0)"
        f" FROM {vocab}"
    ).fetchone()
    return tuple(int(v) for v in row)
