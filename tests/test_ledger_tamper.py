"""Rows changed behind the ledger's back, on every backend: reads refuse them with a coded error
naming table, row and digests, and ``verify`` names session, table, row and what is wrong.

The first tests make edits that leave a seal stale (damage). The attacks after them are what
someone with write access to the database but not the ledger's secret can do: rewrite a row and
recompute its digests and its seal with the public formula (sha256 of the canonical JSON), cut,
move or delete entries and patch the chain and the session's counters to match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from _pg_support import LedgerStore
from comal.errors import LedgerIntegrityError, UserError
from comal.ledger import (
    LedgerBackend,
    LedgerCorrupt,
    LedgerRolledBack,
    LedgerRowDamaged,
    Scope,
    SummaryInput,
    UsageInput,
    verify,
)
from comal.ledger._rows import HEAD, SEALED, sealed_values
from comal.messages import Message, ToolCall, canonical_json, message_to_json, sha256_hex
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
    leaf = SummaryInput("leaf", 0, 0, 0, (), 1, 3, ("t0", "t1"), "asked to fix it", "extractive",
                        "normal", "0" * 64)  # fmt: skip
    led.add_summary(scope, leaf)
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
    # Its newest entry is gone: as an older copy would be, so only a lenient open reads it.
    with pytest.raises(LedgerRolledBack):
        ledger_store.open()
    with ledger_store.open(strict=False) as led:
        report = verify(led)
    kinds = {(f.session, f.table, f.kind) for f in report.faults}
    assert (None, "ledger", "rolled-back") in kinds
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
        seal = led._sealer.seal("entries", sealed_values("entries", row))
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


# -- the attack mounted: no secret, every public formula --------------------------------------
def _public_seal(table: str, values: Any) -> str:
    return sha256_hex(canonical_json([table, *values]))


def _rewrite(led: LedgerBackend, table: str, where: str, args: tuple[Any, ...], **new: Any) -> Any:
    """Change one row and recompute its body digest and seal as anyone can; the row's id."""
    cols = SEALED[table]
    extra = [c for c in ("id", "body") if c not in cols and (c != "body" or "digest" in cols)]
    with led.atomic() as c:  # plain SQL on the database, as its owner could run it
        row = c.execute(f"SELECT {', '.join((*cols, *extra))} FROM {table} WHERE {where}", args)
        values = dict(zip((*cols, *extra), row.fetchone(), strict=True))
        values |= new
        if "body" in new:
            values["digest"] = sha256_hex(new["body"])
        changed = [*new, *(["digest"] if "body" in new else []), "seal"]
        values["seal"] = _public_seal(table, [values[k] for k in cols])
        sets = ", ".join(f"{k} = ?" for k in changed)
        c.execute(
            f"UPDATE {table} SET {sets} WHERE id = ?", (*[values[k] for k in changed], values["id"])
        )
    return values["id"]


_FORGED_OUTPUT = message_to_json(Message.tool("c1", "forged output"))
# (table, the row, its new values as the attacker writes them, a read that must refuse it)
REWRITES: list[tuple[str, str, tuple[Any, ...], dict[str, Any], _Read]] = [
    ("entries", "seq = ?", (2,), {"body": _FORGED_OUTPUT, "output_digest": sha256_hex(
        "forged output"), "size": len(_FORGED_OUTPUT)}, lambda led, s: led.entries(s)),
    ("records", "table_name = ?", ("receipt",), {"body": canonical_json(
        {"call": "c1", "status": "forged"})}, lambda led, s: led.records(s, "receipt")),
    ("checkpoints", "first_seq = ?", (0,), {"body": message_to_json(Message.user("forged"))},
     lambda led, s: led.checkpoints(s)),
    ("requests", "output = ?", (5,), {"output": 5000, "tokens": 5010},
     lambda led, s: led.requests(s)),
    ("sessions", "title = ?", ("demo",), {"meta": canonical_json({"workspace": "/etc"})},
     lambda led, s: led.session(s)),
    ("summaries", "kind = ?", ("leaf",), {"body": "they asked for nothing"},
     lambda led, s: led.summaries(s)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "where", "args", "new", "read"), REWRITES, ids=[r[0] for r in REWRITES]
)
def test_a_row_rewritten_with_public_digests_and_seal_fails_verify(
    ledger_store: LedgerStore,
    table: str,
    where: str,
    args: tuple[Any, ...],
    new: dict[str, Any],
    read: _Read,
) -> None:
    # covers: LED-6
    with ledger_store.open() as led:
        scope = _fill(led)
        row = _rewrite(led, table, where, args, **new)
    with ledger_store.open() as led:
        with pytest.raises(LedgerRowDamaged) as err:
            read(led, scope)
        # The keyed seal it should have is not shown: it would forge the row for the attacker.
        assert (err.value.table, err.value.row, err.value.field) == (table, row, "seal")
        assert err.value.computed == "(a keyed seal, not shown)"
        report = verify(led)
    assert not report.ok and report.sealing.startswith("keyed")
    # Named by session, table and row; what follows from it (a chain head now pointing at a
    # seal that is not the stored one, a spend total) may be named too.
    first = next(f for f in report.faults if f.table == table)
    assert (first.session, first.row, first.kind) == (scope.session, row, "seal")


def _four_steps(led: LedgerBackend) -> tuple[Scope, list[Any]]:
    scope = led.create_session("t", "a")
    for text in ("one", "two", "three", "four"):
        led.append(scope, [Message.user(text)])
    with led.atomic() as c:
        ids = c.execute(
            "SELECT id FROM entries WHERE session_id = ? ORDER BY seq", (scope.session,)
        )
        return scope, [r[0] for r in ids.fetchall()]


def _relink(led: LedgerBackend, scope: Scope, start: int) -> None:
    """What an attacker patches after moving entries: each entry from seq ``start`` resealed over
    the one before it, and the session's counters and chain head, all by the public formulas."""
    cols = ", ".join(SEALED["entries"])
    with led.atomic() as c:
        rows = c.execute(
            f"SELECT id, seal, tokens, {cols} FROM entries WHERE session_id = ? ORDER BY seq",
            (scope.session,),
        ).fetchall()
        prev = None
        for seq, (rid, seal, _tokens, *values) in enumerate(rows):
            if seq >= start:
                values[1:3] = [seq, seq]  # renumbered: each entry is its own step
                values[-1] = prev
                seal = _public_seal("entries", values)
                c.execute("UPDATE entries SET seq = ?, step = ?, prev_seal = ?, seal = ?"
                          " WHERE id = ?", (seq, seq, prev, seal, rid))  # fmt: skip
            prev = seal
        n = len(rows)
        c.execute(
            "UPDATE sessions SET next_seq = ?, entry_count = ?, token_total = ?, last_step = ?,"
            " head = ?, head_seal = ? WHERE id = ?",
            (n, n, sum(r[2] for r in rows), n - 1, prev,
             _public_seal(HEAD, (scope.session, n, prev)), scope.session),
        )  # fmt: skip


def test_a_deleted_middle_entry_is_named_even_with_its_chain_patched(
    ledger_store: LedgerStore,
) -> None:
    # covers: LED-1, LED-6
    with ledger_store.open() as led:
        scope, ids = _four_steps(led)
        with led.atomic() as c:
            c.execute("DELETE FROM entries WHERE id = ?", (ids[1],))
        plain = {(f.table, f.row, f.kind) for f in verify(led).faults}
        assert {("entries", ids[2], "gap"), ("entries", ids[2], "chain")} <= plain
        _relink(led, scope, 1)
        report = verify(led)
        assert [(f.table, f.row, f.kind) for f in report.faults] == [
            ("sessions", scope.session, "head"),
            ("entries", ids[2], "seal"),
            ("entries", ids[3], "seal"),
        ]


def test_swapped_entries_are_named(ledger_store: LedgerStore) -> None:
    # covers: LED-1, LED-6
    with ledger_store.open() as led:
        scope, ids = _four_steps(led)
        with led.atomic() as c:
            for rid, seq in ((ids[1], -1), (ids[2], 1), (ids[1], 2)):
                c.execute("UPDATE entries SET seq = ?, step = ? WHERE id = ?", (seq, seq, rid))
        moved = {(f.row, f.kind) for f in verify(led).faults if f.table == "entries"}
        assert {(ids[2], "seal"), (ids[1], "seal"), (ids[2], "chain")} <= moved
        _relink(led, scope, 1)
        report = verify(led)
    assert [(f.table, f.row, f.kind) for f in report.faults] == [
        ("sessions", scope.session, "head"),
        ("entries", ids[2], "seal"),
        ("entries", ids[1], "seal"),
        ("entries", ids[3], "seal"),
    ]


def test_a_cut_tail_with_a_patched_head_is_named_and_not_extended(
    ledger_store: LedgerStore,
) -> None:
    # covers: LED-1, LED-6
    with ledger_store.open() as led:
        scope, ids = _four_steps(led)
        with led.atomic() as c:
            c.execute("DELETE FROM entries WHERE id = ?", (ids[3],))
        _relink(led, scope, 3)  # counters and head now describe three entries
        report = verify(led)
        assert [(f.table, f.row, f.kind) for f in report.faults] == [
            ("sessions", scope.session, "head")
        ]
        # Appending would seal the cut in under a new head: refused instead.
        with pytest.raises(LedgerRowDamaged) as err:
            led.append(scope, [Message.user("five")])
        assert (err.value.table, err.value.row) == ("sessions", scope.session)
