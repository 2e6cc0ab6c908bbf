"""PostgreSQL's entries are indexed by the next search of their session, from a queue.

An append queues its entries' ids (``fts_pending``) in its own transaction; a search first
indexes what is queued for the sessions it reads. What could go wrong, each mounted here: an
append that commits after a later id was indexed (what a high-water mark would skip forever), two
catch-ups reaching the same queued rows at once, verify meeting entries not yet indexed, and a
session deleted or an index rebuilt while entries wait.
"""

# covers: LED-4, SCL-1

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from _pg_support import fresh_schema, pg_dsn
from comal.ledger import PostgresLedger, Scope, verify
from comal.ledger._query import MAX_HITS
from comal.messages import Message


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema() as name:
        yield name


def _ledger(schema: str) -> PostgresLedger:
    return PostgresLedger(pg_dsn(), schema=schema)


def _rows(led: PostgresLedger, sql: str, *args: object) -> list[tuple[Any, ...]]:
    with led._reading() as c:
        return [tuple(r) for r in c.execute(sql, args).fetchall()]


def _queued(led: PostgresLedger) -> int:
    return int(_rows(led, "SELECT count(*) FROM fts_pending")[0][0])


def test_an_append_queues_its_entries_and_a_search_indexes_them(schema: str) -> None:
    with _ledger(schema) as led:
        scope = led.create_session("t", "a")
        other = led.create_session("t", "b")
        led.append(scope, [Message.user("the walrus migrates at dawn")])
        led.append(other, [Message.user("the walrus of another agent")])
        assert _queued(led) == 2
        assert not _rows(led, "SELECT 1 FROM entries_fts")  # nothing indexed on the append
        hits = led.search(scope, "walrus")
        assert [h.seq for h in hits] == [0]
        # Only the searched session's entries were taken from the queue.
        assert _rows(led, "SELECT session_id FROM fts_pending") == [(other.session,)]
        assert led.index_text() == 1 and _queued(led) == 0


def test_an_append_committed_after_a_later_id_was_indexed_is_still_found(schema: str) -> None:
    # The race a high-water mark loses: A takes an id, B takes a larger one and commits, a
    # catch-up indexes B's, then A commits. A's entry must still be found.
    with _ledger(schema) as a, _ledger(schema) as b:
        scope = a.create_session("t", "agent")
        a.append(scope, [Message.user("opening words")])
        b.search(scope, "opening")  # the queue is empty now
        with a.atomic():
            (late,) = a.append(scope, [Message.user("the late heron")])
            # B, on its own connection, appends to its own session and commits first.
            other = b.create_session("t", "agent")
            (early,) = b.append(other, [Message.user("the early heron")])
            assert late.id < early.id  # ids taken in one order ...
            assert b.index_text() == 1  # ... B's indexed while A's is not yet committed
            assert [h.seq for h in b.search(other, "heron")] == [0]
        # ... and A's committed afterwards.
        assert [h.seq for h in b.search(scope, "heron")] == [1]
        assert [h.seq for h in a.search(scope, "heron")] == [1]


def test_two_searches_catching_up_the_same_backlog_index_each_entry_once(schema: str) -> None:
    with _ledger(schema) as led, _ledger(schema) as one, _ledger(schema) as two:
        scope = led.create_session("t", "agent")
        assert MAX_HITS < 1_100
        for i in range(1_100):  # three batches of the catch-up
            led.append(scope, [Message.user(f"note {i} about the osprey")])
        # A third connection holds the first queued row: both catch-ups must wait on it,
        # which proves they run at the same time over the same rows.
        holder = _ledger(schema)
        with holder.atomic() as c:
            c.execute("SELECT entry_id FROM fts_pending ORDER BY entry_id LIMIT 1 FOR UPDATE")
            results: dict[str, int] = {}
            errors: list[BaseException] = []

            def search(name: str, led_: PostgresLedger) -> None:
                try:
                    results[name] = len(led_.search(scope, "osprey", limit=MAX_HITS))
                except BaseException as exc:
                    errors.append(exc)

            threads = [
                threading.Thread(target=search, args=(n, x))
                for n, x in (("one", one), ("two", two))
            ]
            for t in threads:
                t.start()
            time.sleep(0.5)
            assert all(t.is_alive() for t in threads)  # both blocked on the held row
        for t in threads:
            t.join(30)
        holder.close()
        assert not errors
        assert results == {"one": MAX_HITS, "two": MAX_HITS}
        assert _queued(led) == 0
        indexed = _rows(led, "SELECT count(DISTINCT entry_id), count(*) FROM entries_fts")
        assert indexed == [(1_100, 1_100)]  # every entry once (one chunk each)


def test_verify_passes_with_entries_waiting_and_still_finds_a_damaged_index(
    schema: str,
) -> None:
    with _ledger(schema) as led:
        scope = led.create_session("t", "agent")
        led.append(scope, [Message.user("indexed words here")])
        led.search(scope, "indexed")
        led.append(scope, [Message.user("waiting words here")])
        assert _queued(led) == 1
        report = verify(led, database=False, search=True)
        assert report.ok, report.faults
        with led.atomic() as c:  # damage the indexed entry's vectors
            c.execute("UPDATE entries_fts SET tsv = 'forged:1'::tsvector")
        report = verify(led, database=False, search=True)
        assert not report.ok
        assert any("entries_fts" in f.detail for f in report.faults), report.faults


def test_deleting_a_session_and_rebuilding_the_index_with_entries_waiting(schema: str) -> None:
    with _ledger(schema) as led:
        gone = led.create_session("t", "agent")
        kept = led.create_session("t", "agent")
        led.append(gone, [Message.user("doomed words")])
        led.append(kept, [Message.user("kept words")])
        deletion = led.delete_session(gone, by="test")
        assert "fts_pending" not in deletion.rows  # the queue is the ledger's own table
        assert _rows(led, "SELECT session_id FROM fts_pending") == [(kept.session,)]
        led.append(kept, [Message.user("more kept words")])
        led.rebuild_search_index()
        assert _queued(led) == 0
        assert [h.seq for h in led.search(kept, "kept")] == [0, 1]
        assert verify(led, database=False, search=True).ok


def test_memory_search_indexes_the_agents_other_sessions_first(schema: str) -> None:
    with _ledger(schema) as led:
        past = led.create_session("t", "agent")
        stranger = led.create_session("t", "someone-else")
        now = led.create_session("t", "agent")
        led.append(past, [Message.user("we chose the kestrel layout")])
        led.append(stranger, [Message.user("the kestrel of a stranger")])
        found = led.search_sessions("t", "agent", "kestrel", exclude=now.session)
        assert [e.session for e, _ in found] == [past.session]
        assert _rows(led, "SELECT session_id FROM fts_pending") == [(stranger.session,)]


def test_a_scope_of_another_tenant_is_not_indexed_by_a_search(schema: str) -> None:
    with _ledger(schema) as led:
        mine = led.create_session("t1", "agent")
        theirs = led.create_session("t2", "agent")
        led.append(theirs, [Message.user("their private words")])
        assert led.search(mine, "private") == []
        assert _queued(led) == 1  # their entry waits for their own search
        assert isinstance(theirs, Scope)
