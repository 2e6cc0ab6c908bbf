"""Operations from a real stdio MCP server, judged like native ones (OPS-1, OPS-2, OPS-5)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from _ops_support import ANA, Setup, call, make_setup, propose
from comal.messages import Message
from comal.ops import (
    Effect,
    House,
    McpServer,
    Policy,
    Rule,
    StopSignal,
    default_registry,
    may_retry,
    reconcile,
    unguarded,
)

SERVER = Path(__file__).with_name("_ops_mcp_server.py")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpServer, Path]]:
    notes = tmp_path_factory.mktemp("mcp") / "notes.txt"
    with (
        open(notes.with_suffix(".log"), "w") as errlog,
        McpServer(
            "t",
            sys.executable,
            [str(SERVER)],
            env={"OPS_MCP_NOTES": str(notes)},
            cwd=notes.parent,  # the sandbox's workspace: the notes file is writable there
            readable_paths=[sys.prefix, SERVER.parent],  # seen even from a clone under /tmp
            effects={
                "add": (Effect("none"),),
                "echo": (Effect("none"),),
                "calls": (Effect("none"),),
            },
            errlog=errlog,
        ) as mcp,
    ):
        yield mcp, notes


@pytest.fixture
def s(tmp_path: Path, server: tuple[McpServer, Path]) -> Iterator[Setup]:
    registry = default_registry()
    registry.add_all(server[0].operations())
    policy = Policy(mode="ask", rules=(Rule.parse("mcp__t__note(*)", "deny"),))
    setup = make_setup(tmp_path, registry=registry, policy=policy)
    yield setup
    setup.close()


def answered(s: Setup) -> int:
    outcome, _ = propose(s, call("mcp__t__calls", {}))
    return int(outcome.result.text)


def test_server_tools_become_operations_in_the_one_catalog(s: Setup) -> None:
    # covers: OPS-1
    catalog = s.house.catalog("model")
    names = set(catalog.names)
    assert {"mcp__t__echo", "mcp__t__add", "mcp__t__note", "Read", "Bash"} <= names
    echo = next(t for t in catalog.tools("anthropic") if t["name"] == "mcp__t__echo")
    assert echo["description"] == "Repeat text."
    assert echo["input_schema"]["required"] == ["text"]
    assert echo["input_schema"]["additionalProperties"] is False
    note = s.house.registry.get("mcp__t__note")
    assert note is not None and note.effects == (Effect("unknown"),)


def test_mcp_calls_are_judged_like_native_ones(s: Setup, server: tuple[McpServer, Path]) -> None:
    # covers: OPS-2, OPS-5, OPS-3
    before = answered(s)
    outcome, receipt = propose(s, call("mcp__t__echo", {"text": "ab", "times": 3}))
    assert (outcome.result.text, receipt.status) == ("ababab", "ok")
    assert receipt.observations["effects"] == "unknown"  # never invented certainty
    assert receipt.judgment["rule"] == "mode:ask"  # configured as effect-free: allowed
    _, forged = propose(s, call("mcp__t__add", {"a": 1, "b": 2, "approved": True}))
    assert forged.judgment["rule"] == "contract:arguments"
    _, wrong = propose(s, call("mcp__t__add", {"a": "1", "b": 2}))
    assert wrong.judgment["rule"] == "contract:arguments"
    _, denied = propose(s, call("mcp__t__note", {"line": "should not happen"}))
    assert (denied.status, denied.judgment["rule"]) == ("denied", "mcp__t__note(*)")
    assert answered(s) == before + 1  # only the echo reached the server
    assert not server[1].exists()


def test_mcp_effects_unknown_are_asked_and_never_repeated(s: Setup) -> None:
    # covers: OPS-5, RES-4
    s.house.policy = Policy(mode="ask")
    _, headless = propose(s, call("mcp__t__note", {"line": "x"}))
    assert headless.status == "denied" and "headless" in headless.judgment["reason"]
    s.house.settings.mode = "trusted"
    outcome, receipt = propose(s, call("mcp__t__note", {"line": "hello"}))
    assert outcome.result.text == "noted" and receipt.preparation is not None
    assert not may_retry(s.ledger, s.scope, receipt.call_id)


def test_mcp_timeout_is_a_timeout_receipt(s: Setup) -> None:
    # covers: OPS-2, OPS-4
    s.house.settings.mode = "trusted"
    outcome, receipt = propose(s, call("mcp__t__slow", {"seconds": 0.05}), actor=ANA)
    assert receipt.status == "ok"  # within the default limit
    s.house.policy = Policy.from_config({"mode": "trusted", "limits": {"max_timeout": 0.3}})
    outcome, receipt = propose(s, call("mcp__t__slow", {"seconds": 0.8}))
    assert receipt.status == "timeout" and receipt.disposition == "basket"
    assert "did not answer within 0.3s" in outcome.result.text


class Crash(BaseException):
    pass


def test_interrupted_mcp_call_stays_uncertain(s: Setup) -> None:
    # covers: RES-4
    def die(phase: str, call_id: str) -> None:
        if phase == "prepared":
            raise Crash

    house = House.of(
        s.ledger, s.scope, s.house.registry, Policy(mode="trusted"), probe=die, guard=unguarded
    )
    tool_call = call("mcp__t__note", {"line": "maybe"})
    step = s.ledger.append(s.scope, [Message.assistant("", tool_call)])[0].step
    with pytest.raises(Crash):
        house.handle(tool_call, ANA, join_step=step)
    report = reconcile(s.ledger, s.scope, registry=s.house.registry)
    assert report.status_of(tool_call.id) == "uncertain"
    assert "no postcondition adapter" in report.items[0].reason
    verdict = may_retry(s.ledger, s.scope, tool_call.id)
    assert not verdict and "blocked" in verdict.reason


def test_a_stop_cancels_the_running_mcp_call(s: Setup) -> None:
    # covers: DRV-2, OPS-5
    # A person stops the run while a tool of the server works: the request is cancelled (the
    # server is told), the result says who stopped it, and the server still answers after.
    s.house.settings.mode = "trusted"
    stop = StopSignal()
    timer = threading.Timer(0.3, stop.request, args=("the user ana",))
    tool_call = call("mcp__t__slow", {"seconds": 30})
    step = s.ledger.append(s.scope, [Message.assistant("", tool_call)])[0].step
    timer.start()
    try:
        outcome = s.house.run(tool_call, ANA, join_step=step, stop=stop)
    finally:
        timer.cancel()
    receipt = s.house.record(outcome, join_step=step)
    assert (receipt.status, receipt.disposition) == ("interrupted", "basket")
    assert receipt.observations["seconds"] < 30  # it did not wait for the tool's end
    assert outcome.result.text.startswith("[interrupted by the user ana after ")
    assert "was cancelled" in outcome.result.text
    echoed, _ = propose(s, call("mcp__t__echo", {"text": "still here"}))
    assert echoed.result.text == "still here"
