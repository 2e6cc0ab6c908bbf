"""``comal bench compare``: strategies on the same session, pair checks, and the --quick shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.bench import (
    ComalEngine,
    Full,
    ObservationMasking,
    Pricer,
    Sent,
    Session,
    Strategy,
    load_prices,
    make_strategy,
    run_strategy,
)
from comal.cli import app
from comal.context import EngineConfig, get_engine
from comal.errors import UserError
from comal.ledger import SQLiteLedger
from comal.messages import Message, ToolCall
from comal.tokens import Budget, default_counter

runner = CliRunner()
STEPS = 14


def _output(i: int) -> str:
    return "".join(
        f"step {i} line {j}: value {(i * 7919 + j * 104729) % 99991}\n" for j in range(90)
    )


def _session(ledger: SQLiteLedger) -> Session:
    scope = ledger.create_session("bench", "compare")
    ledger.append(scope, [Message.system("You fix bugs.")])
    ledger.append(scope, [Message.user("Fix the failing test in parser.py.")])
    for i in range(STEPS):
        call = ToolCall(f"call-{i}", "bash", json.dumps({"command": f"cat part{i}.py"}))
        ledger.append(scope, [Message.assistant(f"Reading part {i}.", call)])
        ledger.append(scope, [Message.tool(f"call-{i}", _output(i))])
    ledger.append(scope, [Message.assistant("Done.")])
    entries = tuple(ledger.iter_entries(scope))
    return Session("synthetic", scope, entries, tuple(e.message for e in entries), ledger)


def _run(strategy: Strategy, session: Session, window: int) -> dict[str, Any]:
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    pricer = Pricer(default_counter())
    result = run_strategy(strategy, session, budget, pricer, load_prices(), memory=False)
    return result.summary()


class DropsOldestCall:
    """Deliberately broken: sends everything but the assistant message of the oldest step."""

    name = "broken"
    keeps_store = False

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        messages = [e.message for e in session.entries]
        first = next(i for i, m in enumerate(messages) if m.tool_calls)
        for i in session.turns:
            yield Sent(tuple(m for j, m in enumerate(messages[:i]) if j != first))


class DropsNewestResult:
    """Deliberately broken the other way: the newest result goes, its call stays."""

    name = "broken-result"
    keeps_store = False

    def requests(self, session: Session, budget: Budget) -> Iterator[Sent]:
        messages = [e.message for e in session.entries]
        for i in session.turns:
            request = list(messages[:i])
            if request[-1].tool_result is not None:
                request.pop()
            yield Sent(tuple(request))


def test_a_strategy_that_splits_pairs_is_reported(ledger: SQLiteLedger) -> None:
    # covers: LIM-4
    session = _session(ledger)
    orphaning = _run(DropsOldestCall(), session, 128_000)
    # From the second call on, the first result is in every request without its call.
    assert orphaning["split_pairs"] == STEPS
    assert orphaning["orphans"] == orphaning["split_pairs"]
    dangling = _run(DropsNewestResult(), session, 128_000)
    assert dangling["split_pairs"] == STEPS
    assert dangling["orphans"] == 0
    assert _run(Full(), session, 128_000)["split_pairs"] == 0


def test_comal_keeps_pairs_whole_and_fits_where_full_overflows(ledger: SQLiteLedger) -> None:
    # covers: LIM-1, LIM-2, LIM-4
    session = _session(ledger)
    full = _run(Full(), session, 16_000)
    comal = _run(
        ComalEngine(get_engine("limit"), EngineConfig(counter=default_counter()), "comal-limit"),
        session,
        16_000,
    )
    assert comal["errors"] == 0
    assert full["over_window"] > 0
    assert comal["over_window"] == comal["split_pairs"] == comal["orphans"] == 0
    assert comal["tokens_sent"] < full["tokens_sent"]
    retention = comal["retention"]
    assert retention["lost"] == 0
    assert retention["verbatim"] < STEPS
    assert retention["referenced"] + retention["recoverable"] > 0
    assert full["retention"] == {"verbatim": STEPS, "referenced": 0, "recoverable": 0, "lost": 0}


def test_masking_keeps_the_newest_results_and_rewrites_the_older_ones(
    ledger: SQLiteLedger,
) -> None:
    session = _session(ledger)
    masking = ObservationMasking(5)
    last = list(
        masking.requests(session, Budget.for_window(128_000, system_tokens=0, tools_tokens=0))
    )[-1]
    assert last.messages is not None
    texts = [m.tool_result.text for m in last.messages if m.tool_result is not None]
    assert (
        sum(t.startswith("Old environment output: (90 lines omitted)") for t in texts) == STEPS - 5
    )
    summary = _run(masking, session, 128_000)
    assert summary["split_pairs"] == 0
    assert summary["retention"] == {"verbatim": 5, "referenced": 0, "recoverable": 0, "lost": 9}
    # Each turn masks one more result, so the cached prefix ends there: a lower hit than full.
    assert summary["cache_hit"] < _run(Full(), session, 128_000)["cache_hit"]


def test_langchain_trim_runs_the_real_package(ledger: SQLiteLedger) -> None:
    pytest.importorskip(
        "langchain_core",
        reason="the langchain extra is not installed (make installs it)",
    )
    session = _session(ledger)
    trim = make_strategy("langchain-trim", default_counter())
    budget = Budget.for_window(16_000, system_tokens=0, tools_tokens=0)
    requests = list(trim.requests(session, budget))
    originals = {id(e.message) for e in session.entries}
    # What LangChain kept comes back as the very same comal messages.
    assert all(id(m) in originals for r in requests for m in r.messages or ())
    summary = _run(trim, session, 16_000)
    assert summary["over_window"] == summary["split_pairs"] == 0
    # start_on="human" and a single task message: once the window fills, only the system prompt
    # is left, and the report says so.
    assert summary["empty_requests"] > 0


def test_unknown_and_unavailable_strategies_say_why() -> None:
    counter = default_counter()
    with pytest.raises(UserError, match=r"Python >= 3\.12"):
        make_strategy("openhands-observation-masking", counter)
    with pytest.raises(UserError, match="masking-N"):
        make_strategy("masking-x", counter)
    with pytest.raises(UserError, match="unknown strategy"):
        make_strategy("magic", counter)
    with pytest.raises(UserError, match="settings of the limit engine"):
        make_strategy("comal-limit:no_such_setting=1", counter)
    with pytest.raises(UserError, match="less than or equal"):
        make_strategy("comal-limit:threshold_ratio=2", counter)


def test_engine_settings_can_be_compared_side_by_side(ledger: SQLiteLedger) -> None:
    # covers: CFG-1
    session = _session(ledger)
    name = "comal-limit:threshold_ratio=0.5:target_ratio=0.3:min_target_ratio=0.1"
    tuned = make_strategy(name, default_counter())
    assert tuned.name == name
    default = _run(make_strategy("comal-limit", default_counter()), session, 32_000)
    eager = _run(tuned, session, 32_000)
    assert eager["tokens_sent"] < default["tokens_sent"]
    assert eager["split_pairs"] == 0
    assert eager["retention"]["lost"] == 0


def _transcript(path: Path) -> Path:
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix the failing test."},
    ]
    for i in range(STEPS):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat {i}.py"})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": _output(i)})
    messages.append({"role": "assistant", "content": "Done."})
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_quick_json_has_the_documented_shape(tmp_path: Path) -> None:
    # covers: CCH-2
    small = _transcript(tmp_path / "run.json")
    out = tmp_path / "out"
    args = ["bench", "compare", str(small), "--windows", "16000,32000", "--quick", "--json"]
    result = runner.invoke(
        app, [*args, "--strategies", "full,comal-limit,masking-5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counter"] == "tiktoken:cl100k_base"
    assert [r["strategy"] for r in data["runs"]] == ["full", "comal-limit", "masking-5"]
    for run in data["runs"]:
        assert run["window"] == 16000  # --quick: the first window only
        assert run["transcript"].endswith("run.json")
        assert isinstance(run["tokens_sent"], int) and isinstance(run["peak_input"], int)
        assert set(run["cost_usd"]) == {"anthropic", "openai", "gemini"}
        assert 0 <= run["cache_hit"] <= 1
        assert isinstance(run["split_pairs"], int) and isinstance(run["over_window"], int)
        assert set(run["retention"]) == {"verbatim", "referenced", "recoverable", "lost"}
        assert sum(run["retention"].values()) == STEPS
        assert set(run["assembly_ms"]) == {"p50", "p99", "last"}
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert len(report["runs"][0]["per_turn"]["tokens"]) == STEPS + 1  # and the final answer
    assert "| comal-limit |" in (out / "report.md").read_text(encoding="utf-8")


def test_compare_needs_transcripts_and_sane_windows(tmp_path: Path) -> None:
    result = runner.invoke(app, ["bench", "compare", "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "USER_ERROR"
    small = _transcript(tmp_path / "run.json")
    result = runner.invoke(app, ["bench", "compare", str(small), "--windows", "12", "--json"])
    assert result.exit_code == 2


def _timed_transcript(path: Path, pause_after: int, pause_s: float) -> Path:
    """A mini-swe-agent run whose messages carry their times (``extra.timestamp``): 5 s between
    steps, and ``pause_s`` before the call after step ``pause_after``."""
    at = 1_760_000_000.0
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You fix bugs.", "extra": {"timestamp": at}},
        {"role": "user", "content": "Fix the failing test.", "extra": {"timestamp": at}},
    ]
    for i in range(STEPS):
        at += 5.0
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat {i}.py"})},
        }
        messages.append(
            {"role": "assistant", "content": None, "tool_calls": [call], "extra": {"timestamp": at}}
        )
        at += pause_s if i == pause_after else 1.0
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{i}",
                "content": _output(i),
                "extra": {"timestamp": at},
            }
        )
    messages.append({"role": "assistant", "content": "Done.", "extra": {"timestamp": at + 5}})
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return path


def test_a_transcripts_own_times_expire_the_cache_for_every_strategy(tmp_path: Path) -> None:
    # covers: CCH-2, ENG-1
    paused = _timed_transcript(tmp_path / "paused.traj.json", pause_after=6, pause_s=600.0)
    steady = _timed_transcript(tmp_path / "steady.traj.json", pause_after=6, pause_s=1.0)
    args = ["bench", "compare", str(paused), str(steady), "--windows", "128000", "--json"]
    result = runner.invoke(app, [*args, "--strategies", "full,comal-limit,comal-dag"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)["runs"]
    cold = {(r["transcript"].split("/")[-1], r["strategy"]): r["cold_requests"] for r in runs}
    # The ten-minute tool run leaves the next request with nothing cached, whatever sent it.
    assert cold == {
        ("paused.traj.json", "full"): 1,
        ("paused.traj.json", "comal-limit"): 1,
        ("paused.traj.json", "comal-dag"): 1,
        ("steady.traj.json", "full"): 0,
        ("steady.traj.json", "comal-limit"): 0,
        ("steady.traj.json", "comal-dag"): 0,
    }
    cost = {(r["transcript"].split("/")[-1], r["strategy"]): r["cost_usd"] for r in runs}
    assert (
        cost[("paused.traj.json", "full")]["anthropic"]
        > cost[("steady.traj.json", "full")]["anthropic"]
    )


def test_a_transcript_without_times_is_priced_with_a_warm_cache(tmp_path: Path) -> None:
    # covers: CCH-2
    small = _transcript(tmp_path / "run.json")  # no times: every call follows at once
    result = runner.invoke(
        app,
        ["bench", "compare", str(small), "--windows", "128000", "--strategies", "full", "--json"],
    )
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)["runs"]
    assert run["cold_requests"] == 0
