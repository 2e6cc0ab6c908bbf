"""The frameworks' own strategies as peer rows of ``comal bench compare``: LangChain's
SummarizationMiddleware with a fake summarizer; the Agents SDK's compaction and pydantic-ai
say why they have no row."""

from __future__ import annotations

import json

import pytest

from comal.bench import Pricer, Session, load_prices, make_strategy, run_strategy
from comal.bench._strategies import default_strategies
from comal.errors import UserError
from comal.ledger import SQLiteLedger
from comal.messages import Message, Role, ToolCall
from comal.tokens import Budget, default_counter

STEPS = 30


def _session(ledger: SQLiteLedger) -> Session:
    scope = ledger.create_session("bench", "frameworks")
    ledger.append(scope, [Message.system("You fix bugs.")])
    ledger.append(scope, [Message.user("Fix the failing test in parser.py.")])
    for i in range(STEPS):
        call = ToolCall(f"call-{i}", "bash", json.dumps({"command": f"cat part{i}.py"}))
        text = "".join(f"part {i} line {j}: value {(i * 7919 + j) % 9991}\n" for j in range(60))
        ledger.append(scope, [Message.assistant(f"Reading part {i}.", call)])
        ledger.append(scope, [Message.tool(f"call-{i}", text)])
    ledger.append(scope, [Message.assistant("Done.")])
    entries = tuple(ledger.iter_entries(scope))
    return Session("synthetic", scope, entries, tuple(e.message for e in entries), ledger)


def test_langchain_summarization_runs_the_real_middleware(ledger: SQLiteLedger) -> None:
    pytest.importorskip(
        "langchain.agents.middleware",
        reason="the langchain extra is not installed (make installs it)",
    )
    session = _session(ledger)
    strategy = make_strategy("langchain-summarization", default_counter())
    budget = Budget.for_window(16_000, system_tokens=0, tools_tokens=0)
    requests = [r.messages or () for r in strategy.requests(session, budget)]
    originals = {id(e.message) for e in session.entries}
    summaries = [
        m for r in requests for m in r
        if id(m) not in originals and m.role is Role.USER
        and m.text.startswith("Here is a summary of the conversation to date:")
    ]  # fmt: skip
    # The middleware summarized (its own summary message), kept the rest as the originals, and
    # the state it left is what later calls start from.
    assert summaries
    assert all(id(m) in originals or m in summaries for r in requests for m in r)
    assert len(requests[-1]) < len(session.entries)
    result = run_strategy(strategy, session, budget, Pricer(default_counter()), load_prices())
    summary = result.summary()
    assert summary["split_pairs"] == 0
    # Its default counter is LangChain's approximate one (characters / 4): on these numeric
    # outputs it undercounts, so some requests go over the window; the report counts them.
    assert summary["over_window"] > 0
    assert summary["retention"]["lost"] > 0  # a summarized output is nowhere to read again
    assert "langchain-summarization" in default_strategies()


def test_langchain_summarization_takes_a_trigger_fraction() -> None:
    pytest.importorskip(
        "langchain.agents.middleware",
        reason="the langchain extra is not installed (make installs it)",
    )
    counter = default_counter()
    assert make_strategy("langchain-summarization:trigger=0.5", counter).name.endswith("0.5")
    for bad in ("langchain-summarization:trigger=2", "langchain-summarization:keep=3"):
        with pytest.raises(UserError, match="trigger=<fraction"):
            make_strategy(bad, counter)


def test_frameworks_without_a_row_say_why() -> None:
    counter = default_counter()
    with pytest.raises(UserError, match=r"responses\.compact"):
        make_strategy("openai-agents-compaction", counter)
    with pytest.raises(UserError, match="ships no context strategy"):
        make_strategy("pydantic-ai", counter)
