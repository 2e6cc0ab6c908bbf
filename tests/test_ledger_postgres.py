"""What only PostgreSQL needs proving: concurrent writers, crashes, the search translation, and
that both backends store the very same bytes. The shared behaviour is in test_ledger.py, which
runs on both backends."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _pg_support import fresh_schema, pg_dsn, url_with_schema
from comal.errors import LedgerError, UserError
from comal.ledger import (
    BadSearchQuery,
    InvalidIdentifier,
    PostgresLedger,
    Scope,
    SQLiteLedger,
    open_ledger,
    verify,
)
from comal.ledger._postgres_fts import fts_query, search_vectors, search_words
from comal.messages import Message, ToolCall, group_messages
from comal.tokens import EstimatingCounter


@pytest.fixture
def pg() -> Iterator[PostgresLedger]:
    with fresh_schema() as schema, PostgresLedger(pg_dsn(), schema=schema) as led:
        yield led


def _step(i: int, output: str) -> list[Message]:
    call = ToolCall(f"c{i}", "Bash", f'{{"command": "echo {i}"}}')
    return [Message.assistant(f"step {i}", call), Message.tool(f"c{i}", output)]


def test_one_migration_list_gives_both_backends_the_same_tables(
    tmp_path: Path, pg: PostgresLedger
) -> None:
    # covers: LED-4
    # Each migration is written once; the dialects only spell types. Apart from their full-text
    # tables, both backends hold the same tables with the same columns.
    with open_ledger(tmp_path / "l.db") as sqlite, sqlite.atomic() as c:
        lite = c.execute(
            "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
            " WHERE m.type = 'table' AND m.name NOT LIKE '%fts%'"
        ).fetchall()
    with pg.atomic() as c:
        post = c.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name NOT LIKE '%%fts%%'"
        ).fetchall()
    assert sorted(lite) == sorted(post)


def test_open_ledger_chooses_the_backend_by_url(tmp_path: Path) -> None:
    # covers: LED-4
    with fresh_schema() as schema:
        with open_ledger(pg_dsn(), schema=schema) as led:
            assert isinstance(led, PostgresLedger)
            scope = led.create_session("t", "a")
        # A URL alone can carry the schema, for processes that are only handed a URL.
        with open_ledger(url_with_schema(pg_dsn(), schema)) as led:
            assert led.session(scope) is not None
    with open_ledger(tmp_path / "l.db") as sqlite:
        assert isinstance(sqlite, SQLiteLedger)
    with pytest.raises(UserError, match="PostgreSQL ledgers only"):
        open_ledger(str(tmp_path / "l.db"), schema="s")


def test_connection_failures_name_the_server_not_the_password() -> None:
    # covers: LED-4
    url = "postgresql://comal:s3cret-pw@127.0.0.1:1/nowhere?connect_timeout=2"
    with pytest.raises(LedgerError, match=r"127\.0\.0\.1:1/nowhere") as err:
        PostgresLedger(url)
    assert "s3cret-pw" not in str(err.value) and "server is running" in str(err.value)


def test_both_backends_store_identical_bytes(tmp_path: Path, pg: PostgresLedger) -> None:
    # covers: LED-4, LED-6
    weird = "bad \udc80 bytes\x00\x1b[31m 🐍 \u2028 ünïcode " + "x" * 70_000
    steps = [[Message.user("hello 🌍\r\nworld")], _step(1, weird), _step(2, "plain")]
    with open_ledger(tmp_path / "l.db") as sqlite:
        for led in (sqlite, pg):
            scope = led.create_session("t", "a", session_id="same-session", meta={"b": 1, "a": 2})
            for step in steps:
                led.append(scope, step)
            led.add_checkpoint(scope, Message.user("state"), first_seq=0, last_seq=2)
            led.add_record(scope, "receipt", "Bash", {"z": [1, "ü"], "a": None})
        assert list(sqlite._raw_rows()) == list(pg._raw_rows())
        scope = Scope("t", "a", "same-session")
        a, b = sqlite.entries(scope), pg.entries(scope)
        assert [(e.seq, e.tokens, e.size, e.digest) for e in a] == [
            (e.seq, e.tokens, e.size, e.digest) for e in b
        ]
        assert [e.message for e in a] == [e.message for e in b]
        assert [c.digest for c in sqlite.checkpoints(scope)] == [
            c.digest for c in pg.checkpoints(scope)
        ]
        assert sqlite.records(scope, "receipt")[0].digest == pg.records(scope, "receipt")[0].digest
        assert sqlite.sessions()[0].meta == pg.sessions()[0].meta == {"a": 2, "b": 1}


_DOCS = ["parse_header ValueError", "foo bar baz", "café crème", "don't stop", "x.y z"]
_QUERIES = [
    "ValueError",
    "parse_header",
    "foo OR nothing",
    "foo NOT bar",
    "baz NOT nothing",
    '"..."',
    "NEAR(foo baz)",
    "NEAR(foo baz, 3)",
    "cafe",
    "CAFÉ",
    "par*",
    '"foo bar"',
    '"bar foo"',
    "foo + bar",
    'foo AND ""',
    'foo OR ""',
    "and",
    "foo and bar",
    "ba*z",
    "foo*bar",
    "(foo OR cafe) AND NOT_A_WORD",
    "(foo OR cafe) AND baz",
    "don OR stop",
    "foo NOT bar baz",
    "foo NOT bar OR cafe",
    "NEAR(foo baz) foo",
    "foo * bar",
    '"foo""bar"',
    '"foo"bar',
    "NEAR",
    "NEAR foo",
    "crème*",
    'stop NOT "foo bar"',
    '"foo bar" OR z NOT "x y"',
    'z NOT "" "a b c"',
]
_BAD_QUERIES = [
    *("foo.bar", "don't", "(foo", "a:b", "-foo", "foo OR", "NOT foo", "baz (foo)", "(foo) baz"),
    *("foo **", "near(foo baz)", "NEAR(foo baz,)", "NEAR()", "foo ,", "AND", "foo OR OR bar"),
    *("*foo", "+foo", "foo +", ")", ""),
]


def test_full_text_queries_match_what_sqlite_matches(tmp_path: Path, pg: PostgresLedger) -> None:
    # covers: LED-5, LED-4
    with open_ledger(tmp_path / "l.db") as sqlite:
        found: dict[str, list[set[int]]] = {}
        literal: dict[str, list[set[int]]] = {}
        for led in (sqlite, pg):
            scope = led.create_session("t", "a", session_id="s")
            for doc in _DOCS:
                led.append(scope, [Message.user(doc)])
            for q in _QUERIES:
                found.setdefault(q, []).append({h.seq for h in led.search(scope, q, fts=True)})
            for q in _BAD_QUERIES:
                with pytest.raises(BadSearchQuery, match="full-text query"):
                    led.search(scope, q, fts=True)
            # Read as text (the default), every query, syntax or not, is words to find.
            for q in [*_QUERIES, *_BAD_QUERIES]:
                literal.setdefault(q, []).append({h.seq for h in led.search(scope, q)})
    assert {q: v[1] for q, v in found.items()} == {q: v[0] for q, v in found.items()}
    assert {q: v[1] for q, v in literal.items()} == {q: v[0] for q, v in literal.items()}
    assert fts_query("NEAR(a b)") == "('a' & 'b')"


def _random_texts(n: int) -> list[str]:
    rng = random.Random(7)
    pools = [
        "abcxyz ABCXYZ 0123456789",
        " _-.,:;'\"/\\()[]{}<>!?@#$%^&*+=~`|\t\n",
        "éüñçÅÉØßſİǅﬁ²½",
        "ПриветМИР中文字ひらがなالعربية١٢٣",
        "\u0301\u0308\u200b\u00a0\u2028🐍🌍\x00\udc80",
    ]
    texts = []
    for _ in range(n):
        texts.append("".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, 80))))
    return [*texts, "w" * 2046 + " kept", "w" * 2047 + " dropped", "é" * 1023, "é" * 1024]


def test_stored_vectors_and_queries_hold_the_same_words(pg: PostgresLedger) -> None:
    # covers: LED-5
    texts = _random_texts(400)
    vectors = [" ".join(search_vectors(t)) for t in texts]
    queries = [fts_query(f'"{t.replace(chr(34), " ")}"') or "'none'" for t in texts]
    with pg.atomic() as c:
        rows = c.execute(
            "SELECT array(SELECT lexeme FROM unnest(v::tsvector) ORDER BY 1),"
            " v::tsvector @@ q::tsquery FROM unnest(%s::text[], %s::text[])"
            " WITH ORDINALITY AS x(v, q, i) ORDER BY i",
            (vectors, queries),
        ).fetchall()
    for text, (lexemes, matched) in zip(texts, rows, strict=True):
        words = search_words(text)
        assert set(lexemes) == set(words), text
        assert matched == bool(words), text  # the text, quoted as a phrase, finds itself


def test_search_reaches_past_a_tsvectors_limits(pg: PostgresLedger) -> None:
    # covers: LED-5
    scope = pg.create_session("t", "a")
    huge = " ".join(f"w{i}" for i in range(200_000))  # one tsvector would exceed 1 MB
    pg.append(scope, _step(0, huge + " needle"))
    pg.append(scope, [Message.user("ПРИВЕТ \x00 мир \udc80 parse_header")])
    assert [h.seq for h in pg.search(scope, "needle")] == [1]
    assert [h.seq for h in pg.search(scope, '"w199998 w199999 needle"', fts=True)] == [1]
    assert [h.seq for h in pg.search(scope, "w199998 w199999 needle")] == [1]
    assert [h.seq for h in pg.search(scope, "привет")] == [2]
    assert [h.seq for h in pg.search(scope, "parse_header")] == [2]
    assert pg.search(scope, r"w19999\d needle", regex=True)[0].seq == 1


def test_unstorable_names_are_refused_or_read_as_nothing(pg: PostgresLedger) -> None:
    # covers: LED-2
    scope = pg.create_session("t", "a")
    for bad in ("t\x00", "t\udc80"):
        wrong = Scope(bad, "a", scope.session)
        assert pg.entries(wrong) == [] and pg.session(wrong) is None
        assert pg.sessions(tenant=bad) == []
        with pytest.raises(InvalidIdentifier, match=r"control|format"):
            pg.create_session(bad, "a")
        with pytest.raises(UserError, match="no session"):
            pg.append(wrong, [Message.user("x")])
    with pytest.raises(UserError, match="cannot store"):
        pg.add_record(scope, "event", "k\x00", {})


def test_reads_leave_no_transaction_open_and_writes_commit(pg: PostgresLedger) -> None:
    # covers: LED-1
    # Transactions are explicit statements: a read outside atomic() opens none that could
    # swallow the next write, and a write is visible to another connection when it returns.
    read: list[str] = []
    with pg.trace(lambda sql, params: read.append(sql)):
        assert pg.sessions() == []
    assert read and "BEGIN" not in read
    written: list[str] = []
    with pg.trace(lambda sql, params: written.append(sql)):
        scope = pg.create_session("t", "a")
    assert (written[0], written[-1], written.count("BEGIN")) == ("BEGIN", "COMMIT", 1)
    with PostgresLedger(pg_dsn(), schema=pg.schema) as other:
        assert other.session(scope) is not None


def test_concurrent_writers_never_share_a_seq(pg: PostgresLedger) -> None:
    # covers: LED-1, LED-4
    scope = pg.create_session("t", "a")
    writers, steps = 4, 25
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with PostgresLedger(pg.url, schema=pg.schema, counter=EstimatingCounter()) as led:
                for i in range(steps):
                    led.append(scope, _step(w * 1000 + i, f"writer {w} step {i}"))
        except BaseException as exc:  # reported below: a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    entries = pg.entries(scope)
    assert [e.seq for e in entries] == list(range(writers * steps * 2))
    info = pg.session(scope)
    assert info is not None and info.entries == len(entries)
    assert info.tokens == sum(e.tokens for e in entries)
    assert verify(pg).ok


KILLS = 20


def test_sigkill_never_leaves_a_partial_step(pg: PostgresLedger) -> None:
    # covers: LED-1, LIM-4
    scope = pg.create_session("t", "a")
    assert pg.schema is not None
    name = f"comal_crash_{pg.schema}"
    url = f"{url_with_schema(pg.url, pg.schema)}&application_name={name}"
    writer = Path(__file__).with_name("_crash_writer.py")
    rng = random.Random(1234)
    env: dict[str, Any] = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent / "src"))
    for kill in range(KILLS):
        proc = subprocess.Popen(
            [sys.executable, writer, url, "t", "a", scope.session, str(kill)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        assert proc.stdout.readline().strip() == b"wrote"
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    # A COMMIT the last writer sent before it died may still be landing: the server ends a
    # dead client's backend on its own time. Wait for it, then read.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with pg.atomic() as c:
            alive = c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()[0]
        if not alive:
            break
        time.sleep(0.05)
    report = verify(pg)
    assert report.ok, report.faults[:5]
    assert report.paused == ()
    entries = pg.entries(scope)
    info = pg.session(scope)
    assert info is not None and info.entries == len(entries)
    groups = group_messages([e.message for e in entries])
    assert len(groups) >= KILLS  # every writer committed a step before it was killed
    for g in groups:
        assert g.is_step and not g.open_calls
