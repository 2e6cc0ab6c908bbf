"""The dag engine against the failures peers reported, and its guards (DAG-1..9, OBS-2).

Named after public reports on lossless-claw (a summarizing DAG engine): #268 a sweep that never
converges, #639 a protected tail larger than the target, #1085 a target collapsing toward zero,
#282 a leaf pass firing every turn and wrecking the prompt cache, #79-style garbage fallback
summaries persisted; and an error reply stored as a summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _dag_support import DAG, FORGED, FailingSummarizer, ScriptedSummarizer, same_prefix
from comal.agent._catalog import model_catalog
from comal.compaction import CAP_MARKER, Compactor, Guard, SweepReport
from comal.context import (
    ExtractiveSummarizer,
    ProtectedTailOverflow,
    SummaryRequest,
    SummaryText,
    View,
    get_engine,
)
from comal.context.dag import Blocked, DagConfig, DagLimits, SummarizeLeaf, present
from comal.ledger import LedgerBackend, Scope, SQLiteLedger, open_ledger, verify
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, default_registry
from comal.tokens import Budget, EstimatingCounter
from comal.turns import ContextSession, sweep

COUNTER = EstimatingCounter()
CONFIG = DagConfig(counter=COUNTER, defer_compaction=False)


def _grow(led: LedgerBackend, scope: Scope, steps: int, size: int = 2_000, start: int = 0) -> None:
    for n in range(start, start + steps):
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": f"pytest -k case{n}"}))
        out = "\n".join(f"line {n}.{i} {'x' * 30} src/mod_{n % 7}.py" for i in range(size // 50))
        led.append(
            scope,
            [
                Message.assistant(f"I'll run case {n}", call),
                Message.tool(call.id, out + "\nExit code: 0"),
            ],
        )


def _session(tmp_path: Path, steps: int = 60, size: int = 2_000) -> tuple[SQLiteLedger, Scope]:
    led = open_ledger(tmp_path / "dag.db", counter=COUNTER)
    scope = led.create_session("tenant", "agent")
    led.append(scope, [Message.system("You are careful.")])
    led.append(scope, [Message.user("fix the parser in src/parse.py")])
    _grow(led, scope, steps, size)
    return led, scope


def _budget(window: int = 16_000, system: int = 200) -> Budget:
    return Budget.for_window(window, system_tokens=system, tools_tokens=100)


class _Echo:
    """Returns its sources back: never smaller (garbage for a summary)."""

    name = "echo:test"
    spends = True

    def summarize(self, request: SummaryRequest) -> SummaryText:
        return SummaryText(request.sources + " and more", self.name, 1, 1)


class _Text:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    name = "text:test"
    spends = True

    def summarize(self, request: SummaryRequest) -> SummaryText:
        self.calls += 1
        return SummaryText(self.text, self.name, 1, 1)


def test_a_sweep_converges_and_is_bounded_268(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-3
    led, scope = _session(tmp_path, 120)
    report = sweep(led, scope, DAG, CONFIG, _budget(), _Echo())
    assert report.stopped in {"done", "blocked"} and report.passes <= CONFIG.max_passes_per_sweep
    assert report.made
    for s in report.made:  # each cut at 3× its target (or count-only): smaller than its sources
        assert s.tokens < s.descendant_tokens and s.tokens <= 3 * CONFIG.condensed_target_tokens
    again = sweep(led, scope, DAG, CONFIG, _budget(), _Echo())
    assert again.made == []  # nothing left to do: the next sweep ends at once
    few = DagConfig(counter=COUNTER, max_passes_per_sweep=1)
    led2, scope2 = _session(tmp_path / "b", 120)
    bounded = sweep(led2, scope2, DAG, few, _budget(), ExtractiveSummarizer(COUNTER))
    assert bounded.passes == 1 and bounded.stopped == "passes"


def test_a_pass_that_fails_stops_the_sweep_and_writes_nothing(tmp_path: Path) -> None:
    # covers: DAG-3, DAG-9
    led, scope = _session(tmp_path, 120)
    failing = FailingSummarizer()
    report = sweep(led, scope, DAG, CONFIG, _budget(), failing)
    assert report.stopped == "summarizer failed" and failing.calls == 1
    assert led.summaries(scope) == []
    row = led.breaker("tenant")
    assert row is not None and row.failures == 1
    kinds = [r.kind for r in led.records(scope, "event")]
    assert "dag_summarizer_failed" in kinds


def test_a_fresh_tail_over_the_window_yields_its_older_steps_639(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-4, DAG-5, LIM-5
    led = open_ledger(tmp_path / "tail.db", counter=COUNTER)
    scope = led.create_session("tenant", "agent")
    led.append(scope, [Message.user("go")])
    _grow(led, scope, 8, size=12_000)  # the 8 fresh-tail steps alone are over a 16k window
    scripted = ScriptedSummarizer(COUNTER)
    view = View.from_ledger(led, scope, bases=DAG.bases)
    jobs = DAG.plan(view, _budget(), CONFIG)
    # Not blocked turn after turn (issue 33): the older fresh-tail steps are summarized, the
    # newest stays verbatim.
    assert jobs and all(isinstance(j, SummarizeLeaf) for j in jobs), jobs
    newest = led.entries(scope)[-2].seq  # the last step's call
    assert all(j.last_seq < newest for j in jobs)  # type: ignore[attr-defined]
    report = sweep(led, scope, DAG, CONFIG, _budget(), scripted)
    assert report.made and report.stopped in ("done", "no saving")
    after = View.from_ledger(led, scope, bases=DAG.bases)
    a = DAG.assemble(after, _budget(), CONFIG)
    assert a.history_tokens <= _budget().history_capacity
    assert not led.records(scope, "event", kinds=("dag_blocked",))


def test_what_is_never_left_out_over_the_window_is_reported_not_retried_639(
    tmp_path: Path,
) -> None:
    # covers: DAG-4, LIM-5
    led = open_ledger(tmp_path / "tail.db", counter=COUNTER)
    scope = led.create_session("tenant", "agent")
    # Pinned instructions that alone take most of a 16k window: nothing a pass can summarize.
    led.append(scope, [Message.system("rule " * 13_200)])
    led.append(scope, [Message.user("go")])
    _grow(led, scope, 2, size=2_000)
    scripted = ScriptedSummarizer(COUNTER)
    view = View.from_ledger(led, scope, bases=DAG.bases)
    jobs = DAG.plan(view, _budget(), CONFIG)
    assert [type(j) for j in jobs] == [Blocked] and jobs[0].code == "CONTEXT_PRESSURE_LOOP"  # type: ignore[attr-defined]
    report = sweep(led, scope, DAG, CONFIG, _budget(), scripted)
    assert report.stopped == "blocked" and scripted.calls == []
    sweep(led, scope, DAG, CONFIG, _budget(), scripted)
    assert len(led.records(scope, "event", kinds=("dag_blocked",))) == 1  # said once
    with pytest.raises(ProtectedTailOverflow) as info:
        DAG.assemble(view, _budget(), CONFIG)
    assert info.value.code == "CONTEXT_PRESSURE_LOOP"


def test_the_target_never_collapses_toward_zero_1085(tmp_path: Path) -> None:
    # covers: DAG-1, TOK-4
    huge = _budget(16_000, system=9_000)  # instructions eat most of the window
    limits = DagLimits.of(huge, CONFIG)
    assert limits.target >= int(CONFIG.min_target_ratio * huge.history_capacity) > 0
    assert 0 < limits.target <= limits.trigger <= limits.capacity
    led, scope = _session(tmp_path, 60)
    sweep(led, scope, DAG, CONFIG, huge, ExtractiveSummarizer(COUNTER))
    a = DAG.assemble(View.from_ledger(led, scope, bases=DAG.bases), huge, CONFIG)
    assert sum(1 for i in a.entry_ids if i is not None) >= CONFIG.fresh_tail_turns  # not emptied


def test_a_leaf_pass_does_not_fire_every_turn_282(tmp_path: Path) -> None:
    # covers: DAG-1, CCH-1
    led = open_ledger(tmp_path / "grow.db", counter=COUNTER)
    scope = led.create_session("tenant", "agent")
    led.append(scope, [Message.user("work through the cases")])
    budget = _budget(32_000)
    compactions = turns = steady = 0
    prev = None
    for n in range(150):
        _grow(led, scope, 1, size=1_200, start=n)
        report = sweep(led, scope, DAG, CONFIG, budget, ExtractiveSummarizer(COUNTER))
        compactions += bool(report.made)
        turns += 1
        view = View.from_ledger(led, scope, bases=DAG.bases)
        from _dag_support import DagTurn

        cur = DagTurn(n, view, DAG.assemble(view, budget, CONFIG), None, report.made, [])
        if prev is not None and not report.made:
            steady += 1
            assert same_prefix(prev, cur)
        prev = cur
    assert 2 <= compactions <= turns // 8  # rare and deep, not every turn
    assert steady >= turns - compactions - 1


def test_garbage_and_error_replies_are_never_persisted_79(tmp_path: Path) -> None:
    # covers: DAG-3
    garbage = ("", "   ", "Error: 401 Unauthorized", '{"error": {"message": "overloaded"}}')
    garbage += ("I'm sorry, I cannot help with that.", "<!DOCTYPE html><html>502</html>")
    for text in garbage:
        led, scope = _session(tmp_path / f"g{abs(hash(text))}", 80)
        bad = _Text(text)
        report = sweep(led, scope, DAG, CONFIG, _budget(), bad)
        assert report.made and bad.calls == 2  # normal, aggressive; then the session waits
        first, *rest = led.summaries(scope)
        # ENG-3: the extractive summary stands in, and the header says it made it.
        assert (first.summarizer, first.level) == ("extractive", "aggressive"), text
        assert len(first.meta["rejected"]) == 2
        for s in rest:  # backing off: not called again, the count-only note
            assert s.level == "count-only" and "backing off" in str(s.meta["rejected"])
        for s in (first, *rest):
            assert text.strip() == "" or text not in s.text
        led.close()


def test_output_over_three_times_the_target_is_refused_never_cut(tmp_path: Path) -> None:
    # covers: DAG-3, ENG-3
    led, scope = _session(tmp_path, 80, size=4_000)
    long = _Text(" ".join(f"fact{i} about src/mod.py" for i in range(3_000)))
    report = sweep(led, scope, DAG, CONFIG, _budget(64_000), long)
    leaf = next(s for s in report.made if s.kind == "leaf")
    # A cut of it would be a truncation stored as a summary: refused at both levels, and the
    # extractive summary stands in, within its target.
    assert (leaf.summarizer, leaf.level) == ("extractive", "aggressive")
    assert leaf.tokens <= CONFIG.leaf_target_tokens
    assert "fact2999" not in leaf.text and CAP_MARKER.split("{")[0] not in leaf.text
    assert all("over 3×" in why for why in leaf.meta["rejected"])


def test_a_reply_cut_short_is_never_stored(tmp_path: Path) -> None:
    # covers: ENG-3
    led, scope = _session(tmp_path, 80)

    class _Cut(_Text):
        def summarize(self, request: SummaryRequest) -> SummaryText:
            self.calls += 1
            return SummaryText(self.text, self.name, 10, 10, truncated=True)

    cut = _Cut("Requests: fix the parser in src/parse.py. Commands: pytest -k case1 (exit")
    report = sweep(led, scope, DAG, CONFIG, _budget(), cut)
    leaf = report.made[0]
    assert cut.calls == 2 and leaf.summarizer == "extractive"
    assert cut.text not in leaf.text
    assert all("cut short" in why for why in leaf.meta["rejected"])


def test_the_header_is_the_rows_whatever_the_body_forges(tmp_path: Path) -> None:
    # covers: DAG-6
    led, scope = _session(tmp_path, 80)
    sweep(led, scope, DAG, CONFIG, _budget(), _Text(FORGED))
    row = led.summary_frontier(scope)[0]
    message = present(row)
    lines = message.text.split("\n")
    assert lines[0].startswith(f"[comal summary {row.id} · depth {row.depth} ")
    assert f"descendant_count {row.descendant_count}" in lines[0] and "trust=untrusted" in lines[0]
    assert (
        lines[-1].startswith("[Expand for details about:")
        and f"ctx_expand(summary={row.id})" in lines[-1]
    )
    # The forged header, closing tag and footer inside the body are quoted, not obeyed.
    body = lines[1:-1]
    assert (
        body[0] == f"<untrusted-summary-{row.digest[:12]}>"
        and body[-1] == f"</untrusted-summary-{row.digest[:12]}>"
    )
    assert all(
        not ln.startswith(("[comal summary", "[Expand for details", "</untrusted"))
        for ln in body[1:-1]
    )
    assert DAG.system_clause and "recall cues" in DAG.system_clause


def test_breaker_opens_after_five_failures_then_half_opens(tmp_path: Path) -> None:
    # covers: DAG-9
    led, scope = _session(tmp_path, 120)
    now = [1_000.0]
    guard = Guard(led, scope, CONFIG, clock=lambda: now[0])
    for _ in range(5):
        assert guard.blocked() is None
        guard.failure()
    assert guard.state().breaker == "open" and "breaker open" in str(guard.blocked())
    scripted = _Text("a fine summary of the cases")
    compactor = Compactor(led, scope, scripted, CONFIG, clock=lambda: now[0])
    view = View.from_ledger(led, scope, bases=DAG.bases)
    jobs = [j for j in DAG.plan(view, _budget(), CONFIG) if isinstance(j, SummarizeLeaf)]
    report = SweepReport(scope.session)
    compactor.run(jobs[:1], report)
    assert scripted.calls == 0 and report.made[0].level == "count-only"  # degraded, no call
    now[0] += 61  # past the reset: half-open, one trial goes
    assert guard.state().breaker == "half-open"
    compactor.run(jobs[1:2], report)
    assert scripted.calls == 1 and report.made[1].level == "normal"
    assert guard.state().breaker == "closed"


def test_over_a_spend_cap_the_summarizer_is_not_called(tmp_path: Path) -> None:
    # covers: DAG-9
    led, scope = _session(tmp_path, 120)
    led.add_summarizer_spend(scope, 499_999, "x:y")
    capped = DagConfig(counter=COUNTER, spend_max_tokens_per_hour=500_000)
    scripted = _Text("a fine summary")
    report = sweep(led, scope, DAG, capped, _budget(), scripted)
    assert report.made and scripted.calls == 1  # under the cap: one call, then over
    assert [s.level for s in report.made][1:] == ["count-only"] * (len(report.made) - 1)
    assert "hourly" in str(Guard(led, scope, capped).state().blocked)


def _house(led: LedgerBackend, scope: Scope) -> House:
    return House.of(led, scope, default_registry(), Policy(mode="trusted"))


def _call(house: House, name: str, **args: object) -> str:
    call = ToolCall(
        f"t-{name}-{len(args)}-{abs(hash(json.dumps(args, sort_keys=True)))}",
        name,
        json.dumps(args),
    )
    outcome, receipt = house.handle(call, Actor.user("ana"), surface="cli")
    assert receipt.operation == name  # judged and receipted like any operation
    return outcome.result.text


def test_recall_tools_search_inspect_and_expand(tmp_path: Path) -> None:
    # covers: DAG-7, EVI-2, LED-5
    led, scope = _session(tmp_path, 80)
    sweep(led, scope, DAG, CONFIG, _budget(), ExtractiveSummarizer(COUNTER))
    house = _house(led, scope)
    found = _call(house, "ctx_search", query="which case ran pytest 3")
    assert "ctx_expand(" in found and "score" in found
    leaf = next(s for s in led.summaries(scope) if s.kind == "leaf")
    info = json.loads(_call(house, "ctx_inspect", summary=leaf.id))
    assert info["covers_seq"] == [leaf.first_seq, leaf.last_seq] and info["depth"] == 0
    page = _call(house, "ctx_expand", summary=leaf.id, limit=1_000)
    assert page.startswith(f"[ctx_expand summary={leaf.id}: UTF-16 units 0..1000 of ")
    assert "[next page: ctx_expand(summary=" in page
    wrong = _call(house, "ctx_expand", summary=leaf.id, expected_digest="0" * 64)
    assert "not the expected" in wrong
    missing = _call(house, "ctx_inspect", summary=99_999)
    assert "no summary 99999" in missing
    assert led.records(scope, "event", kinds=("dag_expanded",))
    # covers: OBS-2
    made = led.records(scope, "event", kinds=("dag_summarized", "dag_condensed"))
    assert {r.body["summary"] for r in made} == {s.id for s in led.summaries(scope)}


def test_recall_tools_are_offered_only_under_dag_and_never_over_the_api(tmp_path: Path) -> None:
    # covers: DAG-7, CFG-2
    registry = default_registry()
    names = ("ctx_search", "ctx_inspect", "ctx_expand")
    limit = model_catalog(registry.catalog("model"), get_engine("limit"))
    dag = model_catalog(registry.catalog("model"), get_engine("dag"))
    assert not set(names) & set(limit.names) and set(names) <= set(dag.names)
    assert not set(names) & set(registry.catalog("api").names)
    led, scope = _session(tmp_path, 4)
    house = _house(led, scope)
    call = ToolCall("guess", "ctx_search", json.dumps({"query": "parser"}))
    outcome = house.run(call, Actor.user("ana"), offered=limit)
    assert outcome.result.is_error  # guessed under limit: refused like any unoffered tool


def test_deferred_compaction_runs_off_the_turn(tmp_path: Path) -> None:
    # covers: DAG-8
    led, scope = _session(tmp_path, 120)
    deferred = DagConfig(counter=COUNTER, defer_compaction=True)
    m = ContextSession(led, scope, DAG, deferred, summarizer=lambda: ExtractiveSummarizer(COUNTER))
    assert m.maintain(_budget()) == ()  # returns before any summary exists
    m.drain(60)
    assert led.summaries(scope) and not m.background.errors
    assert led.lease(scope) is None  # released
    inline = ContextSession(
        led, scope, DAG, CONFIG, summarizer=lambda: ExtractiveSummarizer(COUNTER)
    )
    _grow(led, scope, 120, start=500)
    made = inline.maintain(_budget())
    assert made
    assert verify(led).ok


def test_the_latest_request_is_never_replaced_by_a_summary(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-4
    led, scope = _session(tmp_path, 120)
    sweep(led, scope, DAG, CONFIG, _budget(), ExtractiveSummarizer(COUNTER))
    view = View.from_ledger(led, scope, bases=DAG.bases)
    assert view.summaries and view.summaries[0].first_seq <= 1
    a = DAG.assemble(view, _budget(), CONFIG)
    request = led.entries(scope, start_seq=1, end_seq=1)[0]
    assert request.id in a.entry_ids
    sent = a.messages[a.entry_ids.index(request.id)]
    assert sent.parts[1:] == request.message.parts
