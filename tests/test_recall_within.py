"""One recall call reaches a summarized chunk's exact values (ENG-4, issue 33 item 3).

A session-wide BM25 search ranks a short number below shorter messages that also hold it, so
the one entry of the chunk a summary stands for falls out of the top results; ``ctx_search``
with ``within=`` the summary's id searches only what it covers, an exact match first, and the
hit shows the matched text."""

from __future__ import annotations

import json
from pathlib import Path

from comal.context import ExtractiveSummarizer
from comal.context.dag import DagConfig
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, default_registry
from comal.tokens import Budget, EstimatingCounter
from comal.turns import sweep

COUNTER = EstimatingCounter()


def _session(tmp_path: Path) -> tuple[LedgerBackend, Scope]:
    led = open_ledger(tmp_path / "within.db", counter=COUNTER)
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("why does the build fail?")])
    for n in range(40):
        command = f"make build-{n}" if n != 3 else 'grep -n "def main" cli.py\nmake all'
        call = ToolCall(f"c{n}", "Bash", json.dumps({"command": command}))
        if n == 2:  # the one line that matters, deep in a long output
            out = "\n".join(f"compiling unit_{i}.c ok" for i in range(120)) + "\nexit status 37"
        elif n >= 20:
            out = f"retry 37 of build {n}"
        else:
            out = "\n".join(f"linking part_{n}_{i}.o" for i in range(60))
        led.append(scope, [Message.assistant("", call), Message.tool(call.id, out)])
    return led, scope


def _call(house: House, **args: object) -> str:
    call = ToolCall(
        f"s{abs(hash(json.dumps(args, sort_keys=True)))}", "ctx_search", json.dumps(args)
    )
    outcome, receipt = house.handle(call, Actor.user("ana"), surface="cli")
    assert receipt.operation == "ctx_search"  # judged and receipted like any operation
    return outcome.result.text


def test_ctx_search_within_a_summary_finds_its_exact_value_first(tmp_path: Path) -> None:
    # covers: ENG-4, DAG-7
    led, scope = _session(tmp_path)
    config = DagConfig(counter=COUNTER, defer_compaction=False)
    budget = Budget.for_window(16_000, system_tokens=0, tools_tokens=0)
    sweep(led, scope, "dag", config, budget, ExtractiveSummarizer(COUNTER))
    leaf = next(s for s in led.summaries(scope) if s.kind == "leaf" and s.first_seq <= 6)
    assert leaf.last_seq >= 6 and "exit status 37" not in leaf.text  # the summary left it out
    every = led.entries(scope)
    wanted = next(e for e in every if any(c.id == "c2" for c in e.message.tool_calls))
    result = next(e for e in every if e.message.tool_result and e.seq == wanted.seq + 1)
    house = House.of(led, scope, default_registry(), Policy(mode="trusted"))
    wide = _call(house, query="37")
    assert f"entry {result.id} " not in wide  # session-wide, shorter messages crowd it out
    within = _call(house, query="37", within=leaf.id)
    first = within.splitlines()[1]
    assert first.startswith(f"1. entry {result.id} (seq {result.seq}, tool), exact:")
    assert "exit status 37" in first  # the hit shows the matched text
    assert f"ctx_expand(entry={result.id})" in first
    # The command a call ran is searched too (its arguments), exactly.
    ran = _call(house, query="make build-2", within=leaf.id)
    assert ran.splitlines()[1].startswith(f"1. entry {wanted.id} ")
    # As it was written, quotes and newline included (not as its JSON arguments escape them).
    quoted = _call(house, query='grep -n "def main" cli.py\nmake all', within=leaf.id)
    third = next(e for e in every if any(c.id == "c3" for c in e.message.tool_calls))
    assert quoted.splitlines()[1].startswith(f"1. entry {third.id} "), quoted
