"""Rows changed behind the ledger's back, on every backend: reads refuse them with a coded error
naming table, row and digests, and ``verify`` names session, table, row and what is wrong."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from _pg_support import LedgerStore
from comal.errors import LedgerIntegrityError, UserError
from comal.ledger import LedgerBackend, LedgerCorrupt, LedgerRowDamaged, Scope, UsageInput, verify
from comal.ledger._rows import SEALED
from comal.messages import Message, ToolCall, sha256_hex
from comal.tokens import Usage


def _fill(led: LedgerBackend) -> Scope:
    scope = led.create_session("t", "a", title="demo", meta={"workspace": "/w"})
    led.append(scope, [Message.user("fix it")])
    call = ToolCall("c1", "Bash", '{"command": "cat f"}')
    usage = UsageInput(Usage(10, 0, 0, 5, None), "m", "p", {"run": "r", "at": "2025-01-01T00:00Z"})
    led.append(
        scope, [Message.assistant("reading", call), Message.tool("c1", "the file")], usage=usage
    )
    led.add_checkpoint(scope, Message.user("state so far"), first_seq=0, last_seq=2)
    led.add_record(scope, "receipt", "Bash", {"status": "ok", "call": "c1"})
    led.add_record(scope, "event", "turn", {"at_seq": 3})
    return scope


# (table changed, the statement, the read that must refuse it, the fault kind verify reports)
_Read = Callable[[LedgerBackend, Scope], Any]
TAMPER: list[tuple[str, str, _Read, str]] = [
    ("entries", "UPDATE entries SET body = replace(body, 'the file', 'THE file')",
     lambda led, s: led.entries(s), "digest"),
    ("entries", "UPDATE entries SET created_at = '1999-01-01' WHERE seq = 0",
     lambda led, s: led.tail(s, n=5), "seal"),
    ("entries", "UPDATE entries SET tokens = tokens + 1 WHERE seq = 2",
     lambda led, s: led.entry_by_call(s, "c1"), "seal"),
    ("records", "UPDATE records SET body = replace(body, '\"ok\"', '\"no\"')",
     lambda led, s: led.records(s, "receipt"), "digest"),
    ("records", "UPDATE records SET kind = 'Read' WHERE table_name = 'receipt'",
     lambda led, s: led.records(s, "receipt"), "seal"),
    ("checkpoints", "UPDATE checkpoints SET body = replace(body, 'state', 'STATE')",
     lambda led, s: led.latest_checkpoint(s), "digest"),
    ("checkpoints", "UPDATE checkpoints SET first_seq = 1",
     lambda led, s: led.checkpoints(s), "seal"),
    ("requests", "UPDATE requests SET output = 5000",
     lambda led, s: led.requests(s), "seal"),
    ("requests", "UPDATE requests SET meta = replace(meta, '\"r\"', '\"q\"')",
     lambda led, s: led.last_request(s, measured=False), "seal"),
    ("sessions", "UPDATE sessions SET title = 'forged'",
     lambda led, s: led.session(s), "seal"),
    ("sessions", "UPDATE sessions SET meta = replace(meta, '/w', '/etc')",
     lambda led, s: led.sessions(), "seal"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "statement", "read", "kind"), TAMPER, ids=[f"{t[0]}:{t[3]}" for t in TAMPER]
)
def test_a_changed_row_is_refused_on_read_and_named_by_verify(
    ledger_store: LedgerStore, table: str, statement: str, read: _Read, kind: str
) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        scope = _fill(led)
        assert verify(led).ok
    ledger_store.execute(statement)
    with ledger_store.open() as led:
        with pytest.raises(LedgerRowDamaged) as err:
            read(led, scope)
        assert err.value.code == "LEDGER_ROW_DAMAGED" and err.value.table == table
        assert err.value.stored != err.value.computed
        assert f"{table} row {err.value.row}" in str(err.value)
        report = verify(led)
    assert not report.ok
    fault = report.faults[0]
    assert (fault.session, fault.table, fault.kind) == (scope.session, table, kind)
    assert fault.row == err.value.row or table == "sessions"


def test_a_truncated_tail_and_lying_counters_show(ledger_store: LedgerStore) -> None:
    # covers: LED-1, LED-6
    with ledger_store.open() as led:
        scope = _fill(led)
    ledger_store.execute("DELETE FROM requests")
    ledger_store.execute("DELETE FROM entries WHERE seq = 2")
    with ledger_store.open() as led:
        report = verify(led)
    kinds = {(f.session, f.table, f.kind) for f in report.faults}
    assert (scope.session, "sessions", "truncated") in kinds
    assert (scope.session, "sessions", "counters") in kinds
    assert (scope.session, "checkpoints", "range") in kinds
    assert report.paused == ()  # a lost tail is damage, not a session waiting for results


def test_a_row_that_does_not_decode_is_a_coded_error(ledger_store: LedgerStore) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        scope = _fill(led)
    # Consistent digests over bytes that are not a message: written damaged, not changed.
    body = '{"parts":"nope"}'
    ledger_store.execute(
        f"UPDATE entries SET body = '{body}', digest = '{sha256_hex(body)}' WHERE seq = 0"
    )
    with ledger_store.open() as led:
        row = next(e for e in led._raw_entries() if e[1] == 0)  # type: ignore[attr-defined]
        seal = led._sealer.seal("entries", row[: len(SEALED["entries"])])
        ledger_store.execute(f"UPDATE entries SET seal = '{seal}' WHERE seq = 0")
    with ledger_store.open() as led:
        with pytest.raises(LedgerCorrupt) as err:
            led.entries(scope)
        assert isinstance(err.value, LedgerIntegrityError) and err.value.code == "LEDGER_CORRUPT"
        faults = verify(led).faults
    assert ("entries", "decode", 0) in [(f.table, f.kind, f.seq) for f in faults]


def test_the_database_checks_itself(ledger_store: LedgerStore) -> None:
    # covers: LED-6, LED-4
    with ledger_store.open() as led:
        _fill(led)
        report = verify(led)
        if ledger_store.backend == "postgres":
            with led.atomic() as c:
                amcheck = c.execute("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'")
                installed = amcheck.fetchone() is not None
        else:
            installed = True
    assert report.ok
    if installed:
        assert report.database == "ok"
    else:  # .ci/run installs amcheck; a server without it says so instead of claiming "ok"
        assert report.database.startswith("not checked: the amcheck extension")


def test_hostile_numbers_are_refused_not_a_driver_crash(ledger_store: LedgerStore) -> None:
    # covers: LED-2
    huge = 10**30
    with ledger_store.open() as led:
        scope = _fill(led)
        calls: list[Callable[[], object]] = [
            lambda: led.entry(scope, huge),
            lambda: led.record(scope, "event", huge),
            lambda: led.records(scope, "event", since_id=huge),
            lambda: led.entries(scope, start_seq=huge),
            lambda: led.heads(scope, start_seq=-huge),
            lambda: led.tail(scope, n=huge),
            lambda: led.search(scope, "file", limit=huge),
            lambda: led.append(scope, [Message.tool("c9", "x")], join_step=huge),
            lambda: led.add_checkpoint(scope, Message.user("x"), first_seq=0, last_seq=huge),
        ]
        for call in calls:
            with pytest.raises(UserError, match="64 bits"):
                call()
        assert verify(led).ok
