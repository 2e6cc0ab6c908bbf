"""What prompt caching saved, priced once per request and kept as running totals on the session
row (migration ``0005_request_savings``), so ``comal sessions``, ``comal context``, ``/context``
and the TUI's status line read one row however long the session.

The totals must equal what pricing the whole request log gives, on both backends; an old
ledger gets them from its requests; ``verify`` notices totals that disagree; a price catalog that
does not load never costs a request."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _pg_support import LedgerStore
from comal.agent import session_saving
from comal.ledger import LedgerBackend, Scope, UsageInput, verify
from comal.messages import Message
from comal.tokens import PRICES_FILE_ENV, Usage

# covers: CCH-2, LED-6

_PRICED = "claude-sonnet-4-5"  # in the shipped price table
_counts = st.none() | st.integers(0, 200_000)
_usage = st.builds(Usage, _counts, _counts, _counts, _counts, st.none())
_request = st.tuples(
    st.sampled_from([_PRICED, "gpt-4o", "no-such-model", None]),
    _usage,
    st.sampled_from(
        [{}, {"savedVsUncached": 0.25}, {"savedVsUncached": None}, {"cache_ttl": "1h"}]
    ),
)


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and math.isclose(a, b, abs_tol=1e-6)
    )


def _session(led: LedgerBackend) -> Scope:
    return led.create_session("acme", "coder", messages=[Message.user("hi")])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(requests=st.lists(_request, max_size=12))
def test_running_totals_equal_the_priced_request_log(
    any_ledger: LedgerBackend, requests: list[tuple[str | None, Usage, dict[str, Any]]]
) -> None:
    scope = _session(any_ledger)
    for model, usage, meta in requests:
        any_ledger.record_request(scope, None, UsageInput(usage, model, "anthropic", dict(meta)))
    info = any_ledger.session(scope)
    assert info is not None
    log = any_ledger.requests(scope)
    assert info.requests == len(log) == len(requests)
    assert _close(info.saved_usd, session_saving(log))
    listed = next(s for s in any_ledger.sessions(tenant="acme") if s.id == scope.session)
    assert listed.requests == info.requests and _close(listed.saved_usd, info.saved_usd)


def test_an_old_ledger_gets_its_totals_from_its_requests(ledger_store: LedgerStore) -> None:
    with ledger_store.open() as led:
        scope = _session(led)
        usage = Usage(40, 3_000, 200, 10, None)
        led.record_request(scope, None, UsageInput(usage, _PRICED, "anthropic", {}))
        led.record_request(scope, None, UsageInput(usage, "no-such-model", "anthropic", {}))
        led.record_request(scope, None, UsageInput(usage, _PRICED, "x", {"savedVsUncached": 1.5}))
        want = led.session(scope)
        assert want is not None and want.requests == 3 and want.saved_usd is not None
        assert want.saved_usd > 1.5  # the warm priced request saved something too
    # Back to the schema before 0005: the columns and the migration's record gone.
    for statement in (
        "ALTER TABLE requests DROP COLUMN saved_usd",
        "ALTER TABLE sessions DROP COLUMN saved_usd",
        "ALTER TABLE sessions DROP COLUMN request_count",
        "DELETE FROM schema_migrations WHERE name = '0005_request_savings'",
    ):
        ledger_store.execute(statement)
    if ledger_store.backend == "sqlite":
        ledger_store.execute("PRAGMA user_version = 4")
    with ledger_store.open() as led:
        got = led.session(scope)
        assert got is not None and got.requests == 3
        assert _close(got.saved_usd, want.saved_usd)
        assert verify(led).ok


def test_verify_names_totals_that_disagree_with_their_requests(ledger_store: LedgerStore) -> None:
    with ledger_store.open() as led:
        scope = _session(led)
        usage = Usage(40, 3_000, 200, 10, None)
        led.record_request(scope, None, UsageInput(usage, _PRICED, "anthropic", {}))
        assert verify(led).ok
    ledger_store.execute("UPDATE sessions SET saved_usd = saved_usd + 1, request_count = 5")
    with ledger_store.open() as led:
        faults = [f for f in verify(led).faults if f.table == "sessions"]
    assert [f.kind for f in faults] == ["counters"]
    assert faults[0].session == scope.session and "5 requests" in faults[0].detail


def test_a_price_catalog_that_does_not_load_costs_no_request(
    any_ledger: LedgerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"prices": [{"provider": "x", "model": "m", "input": -1}]}))
    monkeypatch.setenv(PRICES_FILE_ENV, str(bad))
    scope = _session(any_ledger)
    usage = Usage(40, 3_000, 200, 10, None)
    any_ledger.record_request(scope, None, UsageInput(usage, _PRICED, "anthropic", {}))
    info = any_ledger.session(scope)
    assert info is not None and info.requests == 1 and info.saved_usd is None
    assert len(any_ledger.requests(scope)) == 1


def test_record_counts_count_kinds_without_reading_bodies(any_ledger: LedgerBackend) -> None:
    # covers: OBS-2
    scope = _session(any_ledger)
    other = _session(any_ledger)
    for kind in ("cache_break", "cache_edit", "cache_edit", "turn"):
        any_ledger.add_record(scope, "event", kind, {"n": 1})
    any_ledger.add_record(other, "event", "cache_break", {"n": 1})
    any_ledger.add_record(scope, "receipt", "cache_edit", {"status": "ok"})
    counts = any_ledger.record_counts(scope, "event", ("cache_break", "cache_edit", "retention"))
    assert counts == {"cache_break": 1, "cache_edit": 2}
    assert any_ledger.record_counts(scope, "event", ()) == {}
    assert any_ledger.record_counts(Scope("acme", "coder", "missing"), "event", ["turn"]) == {}


def test_usage_by_model_sums_in_the_query(any_ledger: LedgerBackend) -> None:
    # covers: TOK-1
    scope = _session(any_ledger)
    for model, usage in (
        ("claude-sonnet-4-5", Usage(10, 100, 5, 7, None)),
        ("gpt-4o", Usage(20, None, None, 3, 1)),
        ("claude-sonnet-4-5", Usage(1, 2, None, 3, None)),
    ):
        any_ledger.record_request(scope, None, UsageInput(usage, model, "p", {}))
    groups = any_ledger.usage_by_model(scope)
    assert groups == [
        ("claude-sonnet-4-5", "p", {"requests": 2, "new_input": 11, "cache_read": 102,
                                    "cache_write": 5, "output": 10, "reasoning": None}),
        ("gpt-4o", "p", {"requests": 1, "new_input": 20, "cache_read": None,
                         "cache_write": None, "output": 3, "reasoning": 1}),
    ]  # fmt: skip
    assert any_ledger.usage_by_model(Scope("acme", "coder", "missing")) == []
