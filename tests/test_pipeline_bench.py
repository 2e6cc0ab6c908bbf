"""``comal bench compare`` with the pipeline engine and LangChain v1's ContextEditingMiddleware."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from comal.bench import Full, Pricer, Session, load_prices, make_strategy, run_strategy
from comal.bench._context_editing import ContextEditing
from comal.errors import UserError
from comal.ledger import SQLiteLedger, open_ledger
from comal.messages import Message, Role, ToolCall
from comal.tokens import Budget, default_counter

pytest.importorskip(
    "langchain.agents.middleware",
    reason="the langchain extra is not installed (make installs it)",
)


def _session(ledger: SQLiteLedger, steps: int = 12) -> Session:
    scope = ledger.create_session("bench", "pipeline")
    ledger.append(scope, [Message.system("You fix bugs.")])
    ledger.append(scope, [Message.user("Fix the failing test in parser.py.")])
    for i in range(steps):
        call = ToolCall(f"call-{i}", "bash", json.dumps({"command": f"cat part{i}.py"}))
        text = "".join(f"step {i} line {j}: {(i * 7919 + j) % 9973}\n" for j in range(80))
        ledger.append(
            scope, [Message.assistant(f"Reading part {i}.", call), Message.tool(call.id, text)]
        )
    ledger.append(scope, [Message.assistant("Done.")])
    entries = tuple(ledger.iter_entries(scope))
    return Session("synthetic", scope, entries, tuple(e.message for e in entries), ledger)


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return _session(open_ledger(tmp_path / "b.db"))


def _run(name: str, session: Session, window: int) -> dict[str, Any]:
    strategy = make_strategy(name, default_counter())
    budget = Budget.for_window(window, system_tokens=0, tools_tokens=0)
    result = run_strategy(
        strategy, session, budget, Pricer(default_counter()), load_prices(), memory=False
    )
    return result.summary()


def test_context_editing_with_its_defaults_waits_for_100k_tokens(session: Session) -> None:
    budget = Budget.for_window(32_000, system_tokens=0, tools_tokens=0)
    sent = list(ContextEditing().requests(session, budget))
    full = list(Full().requests(session, budget))
    assert [s.messages for s in sent] == [s.messages for s in full]  # under its trigger


def test_context_editing_clears_all_but_the_last_three_results(session: Session) -> None:
    budget = Budget.for_window(32_000, system_tokens=0, tools_tokens=0)
    strategy = make_strategy("langchain-context-editing:trigger=1000", default_counter())
    last = list(strategy.requests(session, budget))[-1].messages
    assert last is not None
    results = [m for m in last if m.role is Role.TOOL]
    assert [r.text for r in results[:-3]] == ["[cleared]"] * (len(results) - 3)
    originals = {
        e.message.tool_result.call_id: e.message for e in session.entries if e.message.tool_result
    }  # type: ignore[union-attr]
    for m in results[-3:]:
        assert m == originals[m.tool_result.call_id]  # type: ignore[union-attr]
    assert [m.tool_result.call_id for m in results] == list(originals)[: len(results)]  # type: ignore[union-attr]


def test_pipeline_and_peer_rows_in_a_compare_run(session: Session) -> None:
    # covers: PIP-1
    for name in (
        "comal-pipeline",
        "langchain-context-editing",
        "langchain-context-editing:trigger=window",
    ):
        row = _run(name, session, 16_000)
        assert row["strategy"] == name and row["split_pairs"] == 0 and row["orphans"] == 0
        assert row["turns"] == len(session.turns)
    pipeline = _run("comal-pipeline", session, 16_000)
    assert pipeline["over_window"] == 0 and pipeline["errors"] == 0
    kept = pipeline["retention"]
    assert kept["lost"] == 0  # what the pipeline leaves out stays readable through the ledger
    tuned = _run("comal-pipeline:edit_stride_turns=5", session, 16_000)
    assert tuned["strategy"] == "comal-pipeline:edit_stride_turns=5"


def test_bad_peer_settings_are_named(session: Session) -> None:
    with pytest.raises(UserError, match="trigger=<tokens\\|window>"):
        make_strategy("langchain-context-editing:keep=2", default_counter())
