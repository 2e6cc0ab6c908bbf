"""The board (BRD-1..3): operations of the one registry, derived from receipts, verified only by
a check the house ran, carried across every engine's compaction, shown on the surfaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _agent_support import reply, rig, text, tool
from _context_sessions import COUNTER
from comal.agent import Flags, Runtime, load_config
from comal.context import BOARD_MARK
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.messages import Message, Role, Text, ToolCall, ToolResult
from comal.ops import Policy, Rule, read_output, receipts
from comal.testing import ScriptedProvider
from comal.tokens import Budget, EstimatingCounter
from comal.turns import ContextSession
from comal.work import board_of, board_operations


def test_each_board_change_is_a_receipt_and_the_board_is_derived_from_them(
    tmp_path: Path,
) -> None:
    # covers: BRD-1, BRD-3
    r = rig(tmp_path)
    (r.root / "spec.md").write_text("the spec\n")
    provider = ScriptedProvider(
        [
            reply(
                tool("a1", "BoardAdd", text="parse the input", evidence=["spec.md", "see #12"]),
                tool("a2", "BoardAdd", text="print the report", depends_on=[1]),
            ),
            reply(tool("u1", "BoardUpdate", item=1, status="in_progress")),
            reply(tool("l1", "BoardList")),
            reply(text("board kept"), tool("f", "finish_call")),
        ]
    )
    result = r.agent(provider, settings_kw={"max_turns": 4}).run("plan it")
    assert result.status == "max_turns"  # finish_call did not pass: items are open
    assert r.ledger.entries(r.scope)[-1].message.text.startswith("[finish] NOT finished")
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["a1"].observations["board"][0]["op"] == "add"
    assert made["u1"].observations["board"] == [
        {"v": 1, "op": "update", "item": 1, "status": "in_progress"}
    ]
    assert "board" not in made["l1"].observations  # listing changes nothing
    board = board_of(r.ledger, r.scope)
    assert [(i.id, i.status, i.depends_on) for i in board.items] == [
        (1, "in_progress", ()),
        (2, "pending", (1,)),
    ]
    # The file named as evidence is kept whole as a stored output, its digest on the board.
    kept, note = board.items[0].evidence
    assert kept["path"] == "spec.md" and note == {"note": "see #12"}
    assert read_output(r.ledger, r.scope, kept["record"]) == "the spec\n"
    # Another process derives the same board from the same ledger.
    again = open_ledger(tmp_path / "ledger.db", counter=EstimatingCounter())
    assert board_of(again, r.scope).as_dict() == board.as_dict()
    again.close()


def test_verified_comes_only_from_a_check_the_house_ran(tmp_path: Path) -> None:
    # covers: BRD-1, BRD-3, OPS-2
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(
                tool("a1", "BoardAdd", text="ok.txt exists", check="test -f ok.txt"),
                tool("a2", "BoardAdd", text="no.txt exists", check="test -f no.txt"),
            ),
            # The model's word is not a check: 'verified' is not a status it may set.
            reply(tool("v1", "BoardUpdate", item=1, status="verified")),
            reply(tool("w", "Write", path="ok.txt", content="ok\n")),
            reply(
                tool("d1", "BoardUpdate", item=1, status="done"),
                tool("d2", "BoardUpdate", item=2, status="done"),
            ),
            reply(text("stop")),
        ]
    )
    r.agent(provider, settings_kw={"max_turns": 5}).run("go")
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["v1"].status == "denied" and made["v1"].judgment["rule"] == "contract:arguments"
    board = board_of(r.ledger, r.scope)
    first, second = board.items
    assert first.status == "verified" and first.last_check is not None
    check = next(
        rc for rc in receipts(r.ledger, r.scope) if rc.record_id == first.last_check["receipt"]
    )
    # The check is a Bash call of its own, judged for the model's actor and receipted.
    assert check.operation == "Bash" and check.status == "ok" and check.actor.kind == "user"
    # A failing check leaves the item done, with the failure as its evidence.
    assert second.status == "done" and second.last_check is not None
    assert second.last_check["passed"] is False and "exit code 1" in second.last_check["tail"]
    assert {"check": second.last_check["receipt"], "passed": False} in second.evidence
    result = next(
        e
        for e in r.ledger.entries(r.scope)
        if e.message.tool_result and e.message.tool_result.call_id == "d2"
    )
    assert "its check failed" in result.message.text and BOARD_MARK in result.message.text


def test_a_check_is_judged_under_the_sessions_policy(tmp_path: Path) -> None:
    # covers: BRD-3, OPS-7
    policy = Policy(mode="trusted", rules=(Rule("Bash", "rm *", "deny"),))
    r = rig(tmp_path, policy=policy)
    provider = ScriptedProvider(
        [
            reply(tool("a1", "BoardAdd", text="clean", check="rm -rf build")),
            reply(tool("d1", "BoardUpdate", item=1, status="done")),
            reply(text("stop")),
        ]
    )
    r.agent(provider, settings_kw={"max_turns": 2}).run("go")
    (item,) = board_of(r.ledger, r.scope).items
    assert item.status == "done" and item.last_check is not None
    assert item.last_check["status"] == "denied"  # the model's command gets no more than it


def test_done_waits_for_the_items_it_depends_on(tmp_path: Path) -> None:
    # covers: BRD-1
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(
                tool("a1", "BoardAdd", text="first"),
                tool("a2", "BoardAdd", text="second", depends_on=[1]),
            ),
            reply(
                tool("d2", "BoardUpdate", item=2, status="done"),
                tool("x", "BoardUpdate", item=9, status="done"),
            ),
            reply(tool("bad", "BoardAdd", text="third", depends_on=[7])),
            reply(text("stop")),
        ]
    )
    r.agent(provider, settings_kw={"max_turns": 3}).run("go")
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["d2"].observations["error"] == "BOARD_DEPENDENCY_OPEN"
    assert made["x"].observations["error"] == "BOARD_ITEM_UNKNOWN"
    assert made["bad"].observations["error"] == "BOARD_ITEM_UNKNOWN"
    assert [i.status for i in board_of(r.ledger, r.scope).items] == ["pending", "pending"]


def _reads(led: LedgerBackend, scope: Scope, prefix: str, n: int) -> None:
    for i in range(n):
        call = ToolCall(f"{prefix}{i}", "Read", json.dumps({"path": f"{prefix}{i}.py"}))
        lines = (f"line {k} of {prefix}{i}: some code" for k in range(120))
        led.append(
            scope,
            [
                Message(Role.ASSISTANT, (Text(f"reading {prefix}{i}.py"), call)),
                Message(Role.TOOL, (ToolResult(call.id, "\n".join(lines), name="Read"),)),
            ],
        )


def _board_session(tmp_path: Path, engine: str) -> tuple[ContextSession, str]:
    """A session whose board was shown early, then many large steps after it."""
    led = open_ledger(tmp_path / f"{engine}.db", counter=COUNTER)
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("Build the parser; keep a board.")])
    _reads(led, scope, "h", 8)  # the pipeline keeps its first turns verbatim (PIP-4)
    shown = f"added #1\n\n{BOARD_MARK} 1 items: 1 pending\n#1 [pending] parse the input"
    call = ToolCall("b1", "BoardAdd", json.dumps({"text": "parse the input"}))
    led.append(
        scope,
        [
            Message(Role.ASSISTANT, (call,)),
            Message(Role.TOOL, (ToolResult("b1", shown, name="BoardAdd"),)),
        ],
    )
    _reads(led, scope, "r", 24)
    settings = {"counter": COUNTER}
    return ContextSession(led, scope, engine, settings), shown.split("\n\n", 1)[1]


@pytest.mark.parametrize("engine", ["limit", "dag", "pipeline"])
def test_the_board_survives_a_compaction_of_every_engine(tmp_path: Path, engine: str) -> None:
    # covers: BRD-2, LIM-3
    service, board = _board_session(tmp_path, engine)
    budget = Budget.for_window(24_000, system_tokens=0, tools_tokens=0)
    report = service.compact(budget)
    assert report.made, report
    assembly = service.assemble(service.view(), budget)
    sent = "\n".join(m.text for m in assembly.messages)
    # The board's own entry is covered by what compaction made, yet the board is still sent.
    first_call = service.ledger.entry_by_call(service.scope, "b1")
    assert first_call is not None and first_call.id not in assembly.entry_ids
    assert board in sent, sent[:3000]


def test_state_shows_the_board_on_every_surface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: BRD-2, LIM-7, SRF-1
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [reply(tool("a1", "BoardAdd", text="parse the input", check="true")), reply(text("later"))]
    )
    r.agent(provider, settings_kw={"max_turns": 1}).run("plan")
    runtime = Runtime.open(
        r.ledger, Flags(), resume=r.scope.session, need_model=False, config=load_config()
    )
    outcome = runtime.control("state", {}, surface="cli")
    assert "#1 [pending] parse the input" in outcome.result.text
    state = outcome.receipt.observations["state"]
    assert state["work"]["board"]["items"][0]["text"] == "parse the input"
    assert state["board"]["tool"] == "BoardAdd"  # the limit work state carries it too
    from comal.serve._views import session_view

    info = r.ledger.session(r.scope)
    assert info is not None
    assert session_view(r.ledger, info)["work"]["board"]["items"][0]["status"] == "pending"
    from comal.tui._status import board_note

    assert board_note(runtime) == " · board 0/1 verified, 1 open"


def test_the_work_operations_are_in_the_one_registry(tmp_path: Path) -> None:
    # covers: BRD-1, WRK-1, WRK-5, OPS-1
    led = open_ledger(tmp_path / "l.db")
    runtime = Runtime.open(led, Flags(), need_model=False, config=load_config())
    model = set(runtime.registry.catalog("model").names)
    assert {*(op.name for op in board_operations()), "WorkStepRun", "WorkStepWait"} <= model
    assert {"WorkDraft", "finish_call"} <= model
    cli = set(runtime.registry.catalog("cli").names)
    assert "BoardList" in cli and "WorkStepRun" not in cli and "finish_call" not in cli
    assert "finish_call" in runtime.registry.catalog("api").names
    led.close()
