"""Summary nodes, leases, spend and breaker rows in the ledger, on both backends (LED-4)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from comal.errors import UserError
from comal.ledger import (
    LedgerBackend,
    Scope,
    SummaryConflict,
    SummaryInput,
    open_ledger,
    verify,
)
from comal.messages import Message, ToolCall


def _session(led: LedgerBackend, steps: int = 12) -> Scope:
    scope = led.create_session("tenant", "agent")
    led.append(scope, [Message.system("rules")])
    led.append(scope, [Message.user("fix the parser in src/parse.py")])
    for n in range(steps):
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": f"pytest -k case{n}"}))
        led.append(
            scope, [Message.assistant(f"step {n}", call), Message.tool(call.id, f"out {n} zebra")]
        )
    return scope


def _leaf(first: int, last: int, text: str = "the parser was fixed") -> SummaryInput:
    return SummaryInput(
        "leaf", 0, first, last, (), last - first + 1, 100, ("t0", "t1"), text, "extractive",
        "normal", "0" * 64,
    )  # fmt: skip


def test_leaves_must_cover_adjacent_whole_steps(any_ledger: LedgerBackend) -> None:
    # covers: DAG-1, LED-1
    led = any_ledger
    scope = _session(led)
    with pytest.raises(SummaryConflict):
        led.add_summary(scope, _leaf(2, 4))  # seq 1 (the request) would be skipped
    with pytest.raises(SummaryConflict):
        led.add_summary(scope, _leaf(1, 2))  # ends inside the step 2..3
    first = led.add_summary(scope, _leaf(1, 3))
    assert first.tokens > 0 and len(first.digest) == 64
    with pytest.raises(SummaryConflict):
        led.add_summary(scope, _leaf(1, 3))  # a second process making the same leaf
    with pytest.raises(SummaryConflict):
        led.add_summary(scope, _leaf(6, 7))  # a gap
    led.add_summary(scope, _leaf(4, 5))
    assert [s.first_seq for s in led.summary_frontier(scope)] == [1, 4]
    assert led.entries(scope)[1].message.text == "fix the parser in src/parse.py"  # unchanged


def test_condensing_folds_adjacent_frontier_nodes_once(any_ledger: LedgerBackend) -> None:
    # covers: DAG-2
    led = any_ledger
    scope = _session(led)
    leaves = [led.add_summary(scope, _leaf(a, b)) for a, b in ((1, 3), (4, 5), (6, 7))]
    ids = tuple(s.id for s in leaves)
    draft = SummaryInput(
        "condensed", 1, 1, 7, ids, 7, 300, ("t0", "t1"), "all of it", "extractive", "normal",
        "1" * 64,
    )  # fmt: skip
    top = led.add_summary(scope, draft)
    assert top.children == ids
    frontier = led.summary_frontier(scope)
    assert [s.id for s in frontier] == [top.id] and frontier[0].children == ids
    with pytest.raises(SummaryConflict):
        led.add_summary(scope, draft)  # the same children again
    assert led.summary_parent(scope, ids[0]) == top.id
    assert len(led.summaries(scope)) == 4
    with pytest.raises(UserError):
        led.add_summary(scope, SummaryInput(
            "condensed", 2, 1, 7, (top.id,), 7, 1, ("a", "b"), "x", "e", "normal", "",
        ))  # fmt: skip


def test_search_covers_summaries_and_messages(any_ledger: LedgerBackend) -> None:
    # covers: LED-5, DAG-7
    led = any_ledger
    scope = _session(led)
    led.add_summary(scope, _leaf(1, 3, "decided to rewrite the tokenizer; zebra noted"))
    hits = led.recall_search(scope, "which tokenizer was rewritten")
    assert hits and hits[0].kind == "summary"
    both = led.recall_search(scope, "zebra", limit=50)
    assert {h.kind for h in both} == {"entry", "summary"}
    assert led.search_summaries(scope, "tokenizer")[0].kind == "summary"
    assert led.recall_search(scope, r"out \d+ zebra", mode="regex", limit=3)[0].kind == "entry"
    other = led.create_session("tenant", "other")
    assert led.recall_search(other, "zebra") == []  # session-local


def test_the_lease_is_single_flight_with_expiry(any_ledger: LedgerBackend) -> None:
    # covers: DAG-8, RES-2
    led = any_ledger
    scope = _session(led, 1)
    assert led.acquire_lease(scope, "a", 30, now=100.0)
    assert not led.acquire_lease(scope, "b", 30, now=110.0)
    assert led.renew_lease(scope, "a", 30, now=120.0)
    assert not led.renew_lease(scope, "b", 30, now=120.0)
    assert not led.acquire_lease(scope, "b", 30, now=149.0)
    assert led.acquire_lease(scope, "b", 30, now=151.0)  # a stopped heartbeating: expired
    lease = led.lease(scope)
    assert lease is not None and lease.owner == "b"
    # The takeover is recorded (RES-2), once: renewing one's own lease records nothing.
    assert led.acquire_lease(scope, "b", 30, now=152.0)
    (taken,) = led.records(scope, "event", kinds=["lease_expired"])
    assert taken.body["previous"]["owner"] == "a" and taken.body["taken_by"] == "b"
    assert taken.body["previous"]["expires_at"] == 150.0
    led.release_lease(scope, "a")  # not a's any more: nothing happens
    assert led.lease(scope) is not None
    led.release_lease(scope, "b")
    assert led.lease(scope) is None


def test_spend_and_breaker_rows_are_per_tenant(any_ledger: LedgerBackend) -> None:
    # covers: DAG-9
    led = any_ledger
    scope = _session(led, 1)
    led.add_summarizer_spend(scope, 700, "openai:x", now=1_000.0)
    led.add_summarizer_spend(scope, 300, "openai:x", now=5_000.0)
    assert led.summarizer_spend("tenant", since=0.0) == 1_000
    assert led.summarizer_spend("tenant", since=2_000.0) == 300
    assert led.summarizer_spend("other", since=0.0) == 0
    assert led.breaker("tenant") is None
    led.set_breaker("tenant", failures=5, opened_at=10.0, trial_at=None, now=10.0)
    led.set_breaker("tenant", failures=6, opened_at=11.0, trial_at=None, now=11.0)
    row = led.breaker("tenant")
    assert row is not None and row.failures == 6 and row.opened_at == 11.0


def test_verify_rehashes_summaries(tmp_path: Path) -> None:
    # covers: LED-6
    led = open_ledger(tmp_path / "v.db")
    scope = _session(led)
    led.add_summary(scope, _leaf(1, 3))
    assert verify(led).ok
    led.close()
    raw = sqlite3.connect(tmp_path / "v.db")
    raw.execute("UPDATE summaries SET body = 'forged'")
    raw.commit()
    raw.close()
    led = open_ledger(tmp_path / "v.db")
    report = verify(led)
    assert not report.ok and report.faults[0].kind == "summary-digest"
    led.close()


def test_a_session_with_summaries_can_be_deleted(any_ledger: LedgerBackend) -> None:
    # covers: DAG-2, LED-1
    led = any_ledger
    scope = _session(led)
    kept = _session(led)
    a, b = led.add_summary(scope, _leaf(1, 3)), led.add_summary(scope, _leaf(4, 5))
    led.add_summary(scope, replace(_leaf(1, 5), kind="condensed", depth=1, children=(a.id, b.id),
                                   descendant_count=5))  # fmt: skip
    tomb = led.delete_session(scope)
    # Search rows go before the summaries they index (a foreign key on PostgreSQL).
    assert tomb.rows["summaries"] == 3 and tomb.rows["summary_children"] == 2
    assert led.session(scope) is None and led.summaries(kept) == []
    assert verify(led).ok
