"""A ledger written before ``0003_ledger_hardening`` opens, migrates and verifies on every backend:
its rows get their seals, sessions their latest step, requests the facts the per-turn queries read.

The old ledger is written here with the SQL the old comal ran (its schema is still migration
0001), so the test does not depend on an old release being installed.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from _pg_support import LedgerStore, pg_execute
from comal.ledger import MIGRATIONS, LedgerSecretMissing, Scope, verify
from comal.ledger._common import prepare
from comal.ledger._db import Db
from comal.ledger._migrate import statements
from comal.ledger._seal import Keying
from comal.ledger._sqlite import SQLITE
from comal.messages import Message, ToolCall, canonical_json, message_to_json, sha256_hex
from comal.tokens import EstimatingCounter

SESSION = "old-session"


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def _old_rows() -> list[str]:
    """INSERTs as the old code issued them (column lists of migration 0001); the entries of a
    fresh table get ids 1, 2, 3."""
    counter = EstimatingCounter()
    at = "2025-01-01T00:00:00.000000+00:00"
    out = [
        "INSERT INTO sessions (id, tenant, agent, created_at, next_seq, entry_count, token_total,"
        f" title, meta) VALUES ('{SESSION}', 'acme', 'coder', '{at}', 3, 3, %TOKENS%, 'old',"
        ' \'{"workspace":"/w"}\')'
    ]
    calls = [ToolCall("c1", "Bash", "{}"), ToolCall("c2", "Bash", "{}")]
    messages = [Message.user("old prompt"), Message.assistant("", *calls), Message.tool("c1", "x")]
    tokens = 0
    for seq, msg in enumerate(messages):
        p = prepare(counter, msg)
        tokens += p.tokens
        step = 0 if seq == 0 else 1
        values = [SESSION, seq, step, msg.role.value, p.tokens, p.size, at, p.call_id, p.digest]
        values += [p.output_digest, p.body]
        out.append(
            "INSERT INTO entries (session_id, seq, step, role, tokens, size, created_at, call_id,"
            f" digest, output_digest, body) VALUES ({', '.join(_lit(v) for v in values)})"
        )
    out[0] = out[0].replace("%TOKENS%", str(tokens))
    meta = canonical_json({"run": "r-old", "at": "2025-01-01T00:00:05+00:00", "prompt_last_seq": 0})
    out.append(
        "INSERT INTO requests (session_id, entry_id, model, protocol, new_input, cache_read,"
        f" cache_write, output, reasoning, created_at, meta) VALUES ('{SESSION}', 2, 'm', 'p',"
        f" 100, 20, NULL, 7, NULL, '{at}', {_lit(meta)})"
    )
    body = message_to_json(Message.user("old state"))
    out.append(
        "INSERT INTO checkpoints (session_id, first_seq, last_seq, tokens, created_at, digest,"
        f" body, meta) VALUES ('{SESSION}', 0, 2, 3, '{at}', '{sha256_hex(body)}', {_lit(body)},"
        " '{}')"
    )
    for table, kind, rec in (("receipt", "Bash", {"status": "ok"}), ("event", "turn", {"n": 1})):
        text = canonical_json(rec)
        out.append(
            "INSERT INTO records (session_id, table_name, kind, created_at, digest, body) VALUES"
            f" ('{SESSION}', '{table}', '{kind}', '{at}', '{sha256_hex(text)}', {_lit(text)})"
        )
    return out


def _write_old(store: LedgerStore) -> None:
    rows = _old_rows()
    if store.backend == "sqlite":
        conn = sqlite3.connect(store.path)  # type: ignore[attr-defined]
        for statement in statements(MIGRATIONS[0].statements(SQLITE)):
            conn.execute(statement)
        conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
        conn.execute("INSERT INTO schema_migrations VALUES ('0001_initial', 'then')")
        conn.execute("PRAGMA user_version = 1")
        conn.execute("PRAGMA journal_mode = WAL")
        for statement in rows:
            conn.execute(statement)
        conn.commit()
        conn.close()
        return
    from comal.ledger._postgres import PostgresDialect

    dsn, schema = store.dsn, store.schema  # type: ignore[attr-defined]
    pg_execute(dsn, None, f'CREATE SCHEMA "{schema}"')
    store.execute(MIGRATIONS[0].statements(PostgresDialect()))
    store.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    store.execute("INSERT INTO schema_migrations VALUES ('0001_initial', 'then')")
    for statement in rows:
        store.execute(statement)


def test_an_old_ledger_is_sealed_and_backfilled(ledger_store: LedgerStore) -> None:
    # covers: LED-4, LED-6, TOK-2, TOK-6
    _write_old(ledger_store)
    scope = Scope("acme", "coder", SESSION)
    with ledger_store.open() as led:
        report = verify(led)
        assert report.ok, report.faults
        assert report.paused == (SESSION,)  # c2 still waits for its result
        assert report.rows == {
            "sessions": 1, "entries": 3, "requests": 1, "checkpoints": 1, "records": 2,
            "deletions": 0, "ledger_events": 0,
        }  # fmt: skip
        info = led.session(scope)
        assert info is not None and info.workspace == "/w" and info.entries == 3
        assert led.entries(scope)[0].message.text == "old prompt"
        anchor = led.last_request(scope)
        assert anchor is not None and anchor.entry_id == 2 and anchor.tokens == 127
        assert led.spend("acme", run="r-old") == 127
        assert led.spend("acme", since="2025-01-01T00:00:00Z") == 127
        assert led.spend("acme", since="2025-01-01T00:00:06Z") == 0
        assert led.record_mark(scope) == led.records(scope, "receipt")[0].id
        # The latest step came from the entries: joining it works without a scan.
        led.append(scope, [Message.tool("c2", "late")], join_step=1)
        assert verify(led).paused == ()
    with ledger_store.open() as led:  # opening again migrates nothing
        assert verify(led).ok


def _at_schema_5(store: LedgerStore) -> None:
    """The old ledger brought to schema 5 (sealed, unkeyed: the comal before 0006_keyed_chain)."""
    _at_schema(store, 5)


def _at_schema(store: LedgerStore, version: int) -> None:
    """The old ledger brought to ``version`` by the migrations of that day (from 6 on keyed,
    its rows sealed without their ids: the comal before 0011_sealed_identity)."""
    _write_old(store)
    if store.backend == "sqlite":
        db = Db(sqlite3.connect(store.path, isolation_level=None), SQLITE, "old")  # type: ignore[attr-defined]
    else:
        import psycopg

        from comal.ledger._postgres import PostgresDialect

        conn = psycopg.connect(store.dsn, autocommit=True)  # type: ignore[attr-defined]
        conn.execute(f'SET search_path TO "{store.schema}"')  # type: ignore[attr-defined]
        db = Db(conn, PostgresDialect(), "old")
    keying = Keying(store.backend, "old", None, memory=False)
    for n, m in enumerate(MIGRATIONS[1:version], start=2):
        with db.atomic():
            db.dialect.run_script(db, m.statements(db.dialect))
            if m.backfill is not None:
                m.backfill(db, keying)
            db.execute("INSERT INTO schema_migrations VALUES (?, 'then')", (m.name,))
            db.dialect.migrated(db, n)
    db.close()


def test_keying_an_old_ledger_chains_it_and_keeps_its_damage_visible(
    ledger_store: LedgerStore,
) -> None:
    # covers: LED-1, LED-6
    _at_schema_5(ledger_store)
    # Damage done under the unkeyed seals: the receipt's kind changed, its seal left stale.
    ledger_store.execute("UPDATE records SET kind = 'Read' WHERE table_name = 'receipt'")
    scope = Scope("acme", "coder", SESSION)
    with ledger_store.open() as led:  # migrates: 0006_keyed_chain
        report = verify(led)
        assert [(f.table, f.kind) for f in report.faults] == [("records", "seal")]
        assert report.sealing.startswith("keyed")
        with led.atomic() as c:
            chain = c.execute(
                "SELECT seq, prev_seal, seal FROM entries WHERE session_id = ? ORDER BY seq",
                (SESSION,),
            ).fetchall()
            head = c.execute("SELECT head FROM sessions WHERE id = ?", (SESSION,)).fetchone()[0]
        assert chain[0][1] is None and chain[1][1] == chain[0][2] and chain[2][1] == chain[1][2]
        assert head == chain[2][2]
        led.append(scope, [Message.tool("c2", "late")], join_step=1)
        assert [(f.table, f.kind) for f in verify(led).faults] == [("records", "seal")]


def test_sealing_identity_reseals_an_old_ledger_and_keeps_its_damage_visible(
    ledger_store: LedgerStore,
) -> None:
    # covers: LED-6, LED-1, LED-4
    _at_schema(ledger_store, 10)
    # Damage done under the seals without ids: the receipt's kind changed, its seal left stale.
    ledger_store.execute("UPDATE records SET kind = 'Read' WHERE table_name = 'receipt'")
    scope = Scope("acme", "coder", SESSION)
    with ledger_store.open() as led:  # migrates: 0011_sealed_identity
        report = verify(led)
        assert [(f.table, f.kind) for f in report.faults] == [("records", "seal")]
        assert [led.entry(scope, i).seq for i in (1, 2, 3)] == [0, 1, 2]  # type: ignore[union-attr]
        with led.atomic() as c:
            chain = c.execute(
                "SELECT seq, prev_seal, seal FROM entries WHERE session_id = ? ORDER BY seq",
                (SESSION,),
            ).fetchall()
            head = c.execute("SELECT head FROM sessions WHERE id = ?", (SESSION,)).fetchone()[0]
            counted = c.execute("SELECT sessions FROM ledger_head").fetchone()[0]
        assert chain[0][1] is None and chain[1][1] == chain[0][2] and chain[2][1] == chain[1][2]
        assert head == chain[2][2] and counted == 1
        led.append(scope, [Message.tool("c2", "late")], join_step=1)
        led.create_session("acme", "coder")
        assert [(f.table, f.kind) for f in verify(led).faults] == [("records", "seal")]


def test_sealing_identity_without_the_secret_is_refused_and_writes_nothing(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # covers: LED-6, LED-4
    _at_schema(ledger_store, 10)
    before = _raw_seals(ledger_store)
    secret, state = os.environ["COMAL_LEDGER_SECRET"], os.environ["XDG_STATE_HOME"]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "elsewhere"))  # no key file here
    monkeypatch.delenv("COMAL_LEDGER_SECRET")
    for strict in (True, False):  # not even verify's lenient open skips it
        with pytest.raises(LedgerSecretMissing, match="reseal its rows"):
            ledger_store.open(strict=strict)
    assert _raw_seals(ledger_store) == before  # nothing half resealed
    monkeypatch.setenv("COMAL_LEDGER_SECRET", secret)
    monkeypatch.setenv("XDG_STATE_HOME", state)  # back where the key file is
    with ledger_store.open() as led:
        assert verify(led).ok
    assert _raw_seals(ledger_store) != before


def _raw_seals(store: LedgerStore) -> list[Any]:
    """The entries' seals and the recorded migrations, read beside comal."""
    if store.backend == "sqlite":
        conn = sqlite3.connect(store.path)  # type: ignore[attr-defined]
        try:
            seals = conn.execute("SELECT id, prev_seal, seal FROM entries ORDER BY id").fetchall()
            names = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
        finally:
            conn.close()
        return [*seals, *names]
    import psycopg

    with psycopg.connect(store.dsn) as conn:  # type: ignore[attr-defined]
        conn.execute(f'SET search_path TO "{store.schema}"')  # type: ignore[attr-defined]
        seals = conn.execute("SELECT id, prev_seal, seal FROM entries ORDER BY id").fetchall()
        names = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
    return [*seals, *names]
