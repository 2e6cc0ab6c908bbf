"""Compaction timed by the prompt cache (ENG-1, issue 33 item 1): the dag compacts when the cache
is cold anyway, defers a compaction that would not pay back while it is warm (the debt is
recorded), and pays the debt at the hard threshold whatever the cache."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from comal.compaction import dag_report
from comal.context import View, get_engine
from comal.context.dag import DagConfig, DagLimits, Deferred, SummarizeLeaf, cache_state
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.messages import Message, ToolCall
from comal.tokens import Budget, EstimatingCounter
from comal.turns import ContextSession

COUNTER = EstimatingCounter()
DAG = get_engine("dag")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def _session(
    tmp_path: Path, steps: int, *, pause_before_last: float = 0.0
) -> tuple[LedgerBackend, Scope]:
    """``steps`` steps 10 s apart (each call's result 5 s after it); the last result comes
    ``pause_before_last`` seconds later than that (a long test run, a person away)."""
    led = open_ledger(tmp_path / "timed.db", counter=COUNTER)
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("fix the flaky test")], created_at=_at(0))
    for n in range(steps):
        at = 10.0 * (n + 1)
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": f"pytest -k case{n}"}))
        out = "\n".join(f"case{n} line {i} src/mod_{n % 5}.py ok" for i in range(60))
        led.append(scope, [Message.assistant(f"running case {n}", call)], created_at=_at(at))
        late = pause_before_last if n == steps - 1 else 0.0
        led.append(
            scope, [Message.tool(call.id, out)], join_step=None, created_at=_at(at + 5 + late)
        )
    return led, scope


def _plan(led: LedgerBackend, scope: Scope, config: DagConfig, window: int = 32_000) -> tuple:
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    view = View.from_ledger(led, scope, bases=DAG.bases)
    return DAG.plan(view, budget, config), view, budget


def test_the_cache_is_cold_after_its_lifetime_by_the_entries_own_times(tmp_path: Path) -> None:
    # covers: ENG-1
    led, scope = _session(tmp_path, 4, pause_before_last=400)
    view = View.from_ledger(led, scope, bases=DAG.bases)
    assert cache_state(view, 300) == "cold"
    assert cache_state(view, 3_600) == "warm"  # a 1-hour cache is still warm
    assert cache_state(view, 0) == "warm"  # 0: never taken as cold
    led2, scope2 = _session(tmp_path / "b", 4)
    assert cache_state(View.from_ledger(led2, scope2, bases=DAG.bases), 300) == "warm"


def test_a_warm_compaction_that_would_not_pay_back_is_deferred_and_recorded(
    tmp_path: Path,
) -> None:
    # covers: ENG-1, OBS-2
    led, scope = _session(tmp_path, 24)
    # Over the trigger, but a rewrite this large pays back only after more calls than the
    # session has made: deferred while the cache is warm.
    config = DagConfig(
        counter=COUNTER, defer_compaction=False, cache_write_cost=100,
        context_threshold=0.5, compaction_target=0.3, hard_threshold=0.95,
    )  # fmt: skip
    jobs, view, budget = _plan(led, scope, config)
    limits = DagLimits.of(budget, config)
    assert limits.trigger < sum(e.tokens for e in view.entries) < limits.hard
    assert [type(j) for j in jobs] == [Deferred], jobs
    debt = jobs[0]
    assert isinstance(debt, Deferred) and debt.history_tokens > debt.trigger_tokens
    assert debt.pays_back_after > debt.calls
    service = ContextSession(led, scope, DAG, config)
    service.maintain(budget)
    service.maintain(budget)
    events = led.records(scope, "event", kinds=("dag_deferred",))
    assert len(events) == 1 and events[0].body["calls"] == debt.calls  # once per frontier
    assert led.summaries(scope) == []  # nothing was compacted
    # comal context shows the debt with what is pending.
    pending = dag_report(led, scope, jobs, config)["pending"]
    assert [p["kind"] for p in pending] == ["deferred"]
    # At the price of a cache write that pays back at once, the same history is compacted.
    cheap = config.model_copy(update={"cache_write_cost": 1})
    jobs, _, _ = _plan(led, scope, cheap)
    assert jobs and all(isinstance(j, SummarizeLeaf) for j in jobs)
    assert {j.reason for j in jobs if isinstance(j, SummarizeLeaf)} == {"trigger"}


def test_a_cold_cache_compacts_below_the_trigger(tmp_path: Path) -> None:
    # covers: ENG-1
    led, scope = _session(tmp_path, 26, pause_before_last=900)
    # The seed's thresholds (0.75 → 0.5): a history between the target and the trigger.
    config = DagConfig(
        counter=COUNTER, defer_compaction=False, context_threshold=0.75, compaction_target=0.5,
        min_target_ratio=0.25, fresh_tail_turns=8,
    )  # fmt: skip
    jobs, view, budget = _plan(led, scope, config)
    limits = DagLimits.of(budget, config)
    history = sum(e.tokens for e in view.entries)
    assert history < limits.trigger  # under the trigger: warm, nothing would be due
    assert jobs and {j.reason for j in jobs if isinstance(j, SummarizeLeaf)} == {"cold"}
    warm_led, warm_scope = _session(tmp_path / "w", 26)
    assert _plan(warm_led, warm_scope, config)[0] == ()


def test_the_debt_is_paid_at_the_hard_threshold_whatever_the_cache(tmp_path: Path) -> None:
    # covers: ENG-1, DAG-4
    led, scope = _session(tmp_path, 40)
    config = DagConfig(counter=COUNTER, defer_compaction=False, cache_write_cost=100)
    jobs, view, budget = _plan(led, scope, config, window=16_000)
    limits = DagLimits.of(budget, config)
    assert sum(e.tokens for e in view.entries) > limits.hard
    leaves = [j for j in jobs if isinstance(j, SummarizeLeaf)]
    assert leaves and {j.reason for j in leaves} == {"debt"}
    # Run turn by turn, the warm session that defers never sends a request over its window.
    service = ContextSession(led, scope, DAG, config)
    service.maintain(budget)
    assembly = service.assemble(service.view(), budget)
    assert assembly.history_tokens <= budget.history_capacity
    assert led.summaries(scope)
