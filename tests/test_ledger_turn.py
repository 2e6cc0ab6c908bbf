"""The per-turn queries (issue 10, "Flat per-turn cost"): the same answers as reading everything,
on every backend, from index ranges rather than scans.

``spend`` is what the spend guard summed by decoding every request of the tenant;
``last_request`` is the anchor the estimate looked for by reading the whole request log;
``record_mark`` / ``records(since_id=...)`` are what ``receipt_mark`` decoded every receipt for.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from comal.errors import LedgerError, UserError
from comal.ledger import LedgerBackend, RequestRecord, Scope, SQLiteLedger, UsageInput, verify
from comal.messages import Message, ToolCall
from comal.tokens import Usage

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def ledger(any_ledger: LedgerBackend) -> Iterator[LedgerBackend]:
    yield any_ledger


def _billed(r: RequestRecord) -> int:
    return sum(n or 0 for n in (r.new_input, r.cache_read, r.cache_write, r.output))


def _when(r: RequestRecord) -> datetime | None:
    # The spend guard's own reading of meta.at, kept here as the oracle.
    at = r.meta.get("at")
    if not isinstance(at, str):
        return None
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _fill(ledger: LedgerBackend, seed: int = 3) -> list[Scope]:
    rng = random.Random(seed)
    scopes = [ledger.create_session(t, "a") for t in ("acme", "acme", "other")]
    for scope in scopes:
        ledger.append(scope, [Message.user("go")])
    for i in range(120):
        scope = rng.choice(scopes)
        meta: dict[str, Any] = {}
        if rng.random() < 0.8:  # the runtime's requests; the rest are imported usage
            at = NOW - timedelta(minutes=rng.randint(0, 60 * 30))
            meta = {
                "run": rng.choice(["r1", "r2", "r3"]),
                "at": at.isoformat() if rng.random() < 0.7 else at.replace(tzinfo=None).isoformat(),
                "prompt_last_seq": i if rng.random() < 0.8 else "not a seq",
            }
            if rng.random() < 0.05:
                meta["at"] = "garbage"
        usage = Usage(*(rng.choice([None, rng.randint(0, 5000)]) for _ in range(4)), None)
        call = ToolCall(f"c{i}", "Bash", "{}")
        if rng.random() < 0.7:
            step = ledger.append(
                scope, [Message.assistant(f"s{i}", call)], usage=UsageInput(usage, "m", "p", meta)
            )
            ledger.append(scope, [Message.tool(call.id, "ok")], join_step=step[0].step)
        else:
            ledger.record_request(scope, None, UsageInput(usage, "m", "p", meta))
        if rng.random() < 0.5:
            ledger.add_record(scope, rng.choice(["receipt", "event"]), rng.choice("xyz"), {"i": i})
    return scopes


def test_spend_is_the_guards_sum(ledger: LedgerBackend) -> None:
    # covers: TOK-6
    scopes = _fill(ledger)
    everything = [r for s in ledger.sessions(tenant="acme") for r in ledger.requests(s.scope)]
    for hours in (0, 1, 5, 24, 48):
        since = NOW - timedelta(hours=hours)
        want = sum(_billed(r) for r in everything if (w := _when(r)) is not None and w >= since)
        assert ledger.spend("acme", since=since) == want
        assert ledger.spend("acme", since=since.isoformat()) == want
        assert ledger.spend("acme", since=since.replace(tzinfo=None)) == want  # naive is UTC
    for run in ("r1", "r2", "nope"):
        want = sum(_billed(r) for r in everything if r.meta.get("run") == run)
        assert ledger.spend("acme", run=run) == want
        since = NOW - timedelta(hours=3)
        both = sum(
            _billed(r)
            for r in everything
            if r.meta.get("run") == run and (w := _when(r)) is not None and w >= since
        )
        assert ledger.spend("acme", run=run, since=since) == both
    assert ledger.spend("nobody", since=NOW - timedelta(days=9)) == 0
    assert ledger.spend("t\x00", run="r1") == 0
    with pytest.raises(UserError):
        ledger.spend("acme")
    with pytest.raises(UserError, match="ISO time"):
        ledger.spend("acme", since="soon")
    assert all(r.tokens == _billed(r) for r in everything)
    assert verify(ledger).ok
    assert len(scopes) == 3


def test_last_request_is_the_estimates_anchor(ledger: LedgerBackend) -> None:
    # covers: TOK-2
    for scope in _fill(ledger):
        log = ledger.requests(scope)
        anchor = next(
            (
                r
                for r in reversed(log)
                if r.entry_id is not None
                and r.new_input is not None
                and isinstance(r.meta.get("prompt_last_seq"), int)
            ),
            None,
        )
        assert ledger.last_request(scope) == anchor
        assert ledger.last_request(scope, measured=False) == (log[-1] if log else None)
    assert ledger.last_request(Scope("x", "y", "z")) is None


def test_usage_totals_per_run(ledger: LedgerBackend) -> None:
    # covers: TOK-1
    for scope in _fill(ledger):
        for run in (None, "r1", "r2"):
            log = [r for r in ledger.requests(scope) if run is None or r.meta.get("run") == run]
            want: dict[str, int | None] = {"requests": len(log)}
            for name in ("new_input", "cache_read", "cache_write", "output", "reasoning"):
                values = [getattr(r, name) for r in log if getattr(r, name) is not None]
                want[name] = sum(values) if values else None
            assert ledger.usage_totals(scope, run=run) == want


def test_marks_and_record_ranges(ledger: LedgerBackend) -> None:
    # covers: OPS-3, OBS-2
    for scope in _fill(ledger):
        receipts = ledger.records(scope, "receipt")
        assert ledger.record_mark(scope) == max((r.id for r in receipts), default=0)
        assert ledger.record_mark(scope, "event") == max(
            (r.id for r in ledger.records(scope, "event")), default=0
        )
        events = ledger.records(scope, "event")
        for since in (None, 0, *(e.id for e in events[:3])):
            for limit in (None, 0, 1, 2):
                for kinds in (None, ["x"], ["x", "z"]):
                    want = [
                        e
                        for e in events
                        if (since is None or e.id > since) and (kinds is None or e.kind in kinds)
                    ]
                    want = want if limit is None else want[:limit]
                    got = ledger.records(scope, "event", kinds=kinds, since_id=since, limit=limit)
                    assert got == want
        assert all(r.table == "event" for r in events)
    with pytest.raises(UserError):
        ledger.records(scope, "event", limit=-1)
    assert ledger.record_mark(Scope("x", "y", "z")) == 0


def test_join_step_reads_the_stored_latest_step(ledger: LedgerBackend) -> None:
    # covers: LED-1
    scope = ledger.create_session("t", "a")
    with pytest.raises(LedgerError, match="latest step"):
        ledger.append(scope, [Message.tool("c0", "x")], join_step=0)
    calls = [ToolCall(f"c{k}", "Bash", "{}") for k in range(3)]
    first = ledger.append(scope, [Message.assistant("", *calls)])
    for call in calls:
        ledger.append(scope, [Message.tool(call.id, "r")], join_step=first[0].step)
    ledger.append(scope, [Message.user("next")])
    with pytest.raises(LedgerError, match=r"latest step \(4\)"):
        ledger.append(scope, [Message.tool("c0", "late")], join_step=first[0].step)
    assert verify(ledger).ok


def test_bad_usage_is_refused_not_a_driver_error(ledger: LedgerBackend) -> None:
    # covers: TOK-1
    scope = ledger.create_session("t", "a")
    for bad in (2**63, 10**30):  # Usage itself refuses negatives and non-integers
        u = UsageInput(Usage(bad, None, None, None, None))
        with pytest.raises(UserError, match="whole number"):
            ledger.record_request(scope, None, u)
    with pytest.raises(UserError, match="not in session"):
        ledger.record_request(scope, 999_999, UsageInput(Usage(1, None, None, None, None)))


def test_per_turn_queries_never_scan_a_table(ledger: LedgerBackend) -> None:
    # covers: TOK-6
    if not isinstance(ledger, SQLiteLedger):
        pytest.skip("the statement trace is SQLite's; PostgreSQL uses the same indexes")
    scopes = _fill(ledger)
    scope = scopes[0]
    mark = ledger.record_mark(scope)
    traced: list[tuple[str, Any]] = []
    with ledger.trace(lambda sql, params: traced.append((sql, params))):
        ledger.spend("acme", since=NOW - timedelta(hours=1))
        ledger.spend("acme", since=NOW - timedelta(days=1))
        ledger.spend("acme", run="r1")
        ledger.last_request(scope)
        ledger.record_mark(scope)
        ledger.records(scope, "receipt", since_id=mark)
        ledger.records(scope, "event", kinds=["x", "y"], since_id=0, limit=20)
        ledger.append(scope, [Message.user("turn")])
    # The plans, from a connection of the test's own beside the ledger.
    with closing(sqlite3.connect(ledger.path)) as conn:
        plans = {
            sql: " | ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in traced
            if sql.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT"))
        }
    scans = {
        sql: plan for sql, plan in plans.items() if "SCAN " in plan.replace("SCAN CONSTANT ROW", "")
    }
    assert scans == {}
    assert any("requests_spend" in p and "spend_minutes" in p for p in plans.values())
    assert any("SEARCH spend_runs USING PRIMARY KEY" in p for p in plans.values())
    assert any("requests_anchor" in p for p in plans.values())
