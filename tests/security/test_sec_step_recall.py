"""Issue 30, item 1: one agent's work step read another agent's private outputs through
``memory_search``.

Every work step ran as the one agent ``subagent``, so a step's ``memory_search`` covered every
step of every agent of the tenant: bob's step was answered with alice's step's ``Read`` of a
``secret.txt``, token and all, across workspaces. A step now runs as its coordinator's agent
(LED-3 links it by ``parent``), so what it recalls is that agent's by the ledger's own
(tenant, agent) scope (MEM-2): its coordinator's sessions and their steps, never another
agent's. The attack runs through the real command line and the ``script:`` model: two agents
of one tenant, alice and bob, each coordinating work steps in a workspace of its own; bob's
steps search with ``memory_search`` (limit engine), ``session_search`` (pipeline) and
``ctx_search`` (dag), and ``comal memory search --session`` searches as bob's step does.
A ledger written before the fix keeps its steps under ``subagent``: no session of that agent
may search, and no step of today's reaches them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool
from _work_support import write_lines
from comal.cli import app, main
from comal.ledger import LedgerBackend, Scope, open_ledger
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, default_registry
from comal.work import steps_of

runner = CliRunner()
TOKEN = "tok-7f3a9c51e0d2"
BOB_MARK = "bluefinch"


def _config(folder: Path, agent: str) -> Path:
    path = folder / f"{agent}.json"
    path.write_text(json.dumps({"tenant": "acme", "agent": agent}))
    return path


def _run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    config: Path,
    workspace: Path,
    script: Path,
    prompt: str,
) -> dict[str, Any]:
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    flags = ["--model", f"script:{script}", "--mode", "trusted", "--workspace", str(workspace)]
    try:
        main(["-p", prompt, *flags, "--json"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr()
    out = capsys.readouterr().out
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data


def _coordinator(folder: Path, steps: list[dict[str, Any]], kids: list[list[Any]]) -> Path:
    script = write_lines(
        folder / "coord.jsonl",
        [
            reply(*[tool(f"run{n}", "WorkStepRun", **s) for n, s in enumerate(steps, 1)]),
            reply(tool("wait", "WorkStepWait")),
            reply(text("done"), tool("fin", "finish_call")),
        ],
    )
    for n, kid in enumerate(kids, 1):
        write_lines(folder / "coord.jsonl.children" / f"{n}.jsonl", kid)
    return script


def _results(led: Any, scope: Scope) -> dict[str, str]:
    return {
        e.message.tool_result.call_id: e.message.tool_result.text
        for e in led.entries(scope)
        if e.message.tool_result is not None
    }


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMAL_LEDGER", str(tmp_path / "ledger.db"))
    for name in ("alice", "bob"):
        (tmp_path / name / "ws").mkdir(parents=True)
    (tmp_path / "alice" / "ws" / "secret.txt").write_text(f"the deploy token is {TOKEN}\n")
    return tmp_path


def test_a_step_never_recalls_another_agents_step(
    shared: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: MEM-2, LED-3, WRK-1
    alice = _coordinator(
        shared / "alice",
        [{"objective": "read secret.txt", "tools": ["Read"]}],
        [[reply(tool("read", "Read", path="secret.txt")), reply(text("read it"))]],
    )
    done = _run(monkeypatch, capsys, _config(shared, "alice"), shared / "alice" / "ws", alice,
                "keep the secret")  # fmt: skip
    assert done["status"] == "finished"
    query = "deploy token secret"  # bob does not know the token: he looks for it
    bob = _coordinator(
        shared / "bob",
        [
            {"objective": "recall the token", "tools": ["memory_search"]},
            {"objective": "search for it", "tools": ["session_search"], "engine": "pipeline"},
            {"objective": "search for it", "tools": ["ctx_search"], "engine": "dag"},
        ],
        [
            [
                reply(tool("m1", "memory_search", query=query)),
                reply(tool("m2", "memory_search", query=BOB_MARK)),
                reply(text("searched")),
            ],
            [reply(tool("s1", "session_search", query="deploy token")), reply(text("searched"))],
            [reply(tool("c1", "ctx_search", query=query)), reply(text("searched"))],
        ],
    )
    prompt = f"the {BOB_MARK} project: find the deploy token"
    ran = _run(monkeypatch, capsys, _config(shared, "bob"), shared / "bob" / "ws", bob, prompt)
    assert ran["status"] == "finished"
    with open_ledger(shared / "ledger.db") as led:
        parent = led.resolve(ran["session"])
        states = steps_of(led, parent)
        assert [s.outcome for s in states] == ["finished"] * 3
        # A step runs under its coordinator's agent: the ledger's (tenant, agent) scope.
        assert {s.delegation.agent for s in states} == {"bob"}
        said = {}
        for s in states:
            said |= _results(led, s.delegation.scope(parent))
        assert set(said) == {"m1", "m2", "s1", "c1"}
        for call, answer in said.items():
            assert TOKEN not in answer, (call, answer)
        # What its coordinator said is the step's to recall.
        assert BOB_MARK in said["m2"] and ran["session"][:8] in said["m2"]
        step = states[0].delegation.child
    # The command line, searching as bob's step does, finds nothing of alice's either.
    shown = runner.invoke(app, ["memory", "search", query, "--session", step, "--json"])
    assert shown.exit_code == 0, shown.output
    assert TOKEN not in shown.stdout


def _legacy_step(led: LedgerBackend, coordinator: Scope, *said: Message) -> Scope:
    """A step's child session as comal wrote it before the fix: agent ``subagent``."""
    return led.create_session(
        coordinator.tenant, "subagent", parent=coordinator.session, messages=list(said)
    )


def _memory_search(led: LedgerBackend, scope: Scope, query: str) -> tuple[str, str]:
    """The model's memory_search in ``scope``, through a house: (status, its text)."""
    call = ToolCall("m1", "memory_search", json.dumps({"query": query}))
    step = led.append(scope, [Message.assistant("", call)])[0].step
    house = House.of(led, scope, default_registry(), Policy(mode="trusted"))
    outcome, receipt = house.handle(call, Actor.subagent(scope.session, "x"), join_step=step)
    return receipt.status, outcome.result.text


def test_steps_an_older_comal_ran_as_subagent_are_searched_by_no_step(
    any_ledger: LedgerBackend, tmp_path: Path
) -> None:
    # covers: MEM-2, LED-2, LED-3
    led = any_ledger
    alice = led.create_session("acme", "alice", messages=[Message.user("keep the secret")])
    bob = led.create_session("acme", "bob", messages=[Message.user("find the deploy token")])
    read = ToolCall("r1", "Read", json.dumps({"path": "secret.txt"}))
    _legacy_step(
        led,
        alice,
        Message.user("read secret.txt"),
        Message.assistant("", read),
        Message.tool("r1", f"the deploy token is {TOKEN}"),
    )
    old = _legacy_step(led, bob, Message.user("recall the token"))
    # Bob's step resumed from the old ledger runs as subagent: its search is refused.
    status, said = _memory_search(led, old, "deploy token secret")
    assert status == "error" and said.startswith("[SCOPE_INCOMPLETE]"), (status, said)
    assert TOKEN not in said and "nothing was searched" in said
    # A step of today's runs as bob: alice's old step is not bob's.
    new = led.create_session("acme", "bob", parent=bob.session, messages=[Message.user("go")])
    status, said = _memory_search(led, new, "deploy token secret")
    assert status == "ok" and TOKEN not in said and bob.session[:8] in said
