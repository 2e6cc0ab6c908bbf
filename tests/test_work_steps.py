"""Delegated work steps (WRK-1..3): the durable delegation record, children in their own
sessions under the configured bound, never wider than their parent, answered from their ledgers,
and what a resume after an abrupt stop does with each."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from _agent_support import Crash, crash_at, reply, rig, settings_for, text, tool
from _work_support import Barrier, Kids
from comal.agent import Agent, WorkSettings, lock_session
from comal.ledger import LedgerBackend
from comal.messages import Message
from comal.ops import House, Policy, Rule, Workspace, default_registry, receipts
from comal.providers import ModelRequest
from comal.testing import FunctionProvider, ScriptedProvider
from comal.work import DELEGATED, STARTED, delegations, drafts_of, render_draft, steps_of


def _kid(k: str, *, usage: dict[str, int] | None = None) -> list[dict[str, Any]]:
    first = reply(tool(f"{k}w", "Write", path=f"{k}.txt", content=f"{k}\n"), usage=usage or {})
    return [first, reply(text(f"wrote {k}.txt"))]


_ACCEPT = [{"step": n, "reason": "this test looks at the incomplete step"} for n in (1, 2)]


def _coordinator(*runs: dict[str, Any], then: list[dict[str, Any]] | None = None) -> list[Any]:
    calls = [tool(f"run{i}", "WorkStepRun", **args) for i, args in enumerate(runs, 1)]
    return [reply(*calls), reply(tool("wait", "WorkStepWait")), *(then or [reply(text("done"))])]


def test_a_step_is_recorded_before_its_child_starts_and_answered_from_its_ledger(
    tmp_path: Path,
) -> None:
    # covers: WRK-1, WRK-2, LED-3
    r = rig(tmp_path)
    seen: list[dict[str, Any]] = []
    child_script = ScriptedProvider(_kid("a"))

    def child(req: ModelRequest) -> Any:
        if not seen:
            (record,) = r.ledger.records(r.scope, "event", kinds=(DELEGATED,))
            seen.append(record.body)
        return child_script.request(req)

    provider = ScriptedProvider(_coordinator({"objective": "write a.txt", "tools": ["Write"]}))
    result = r.agent(provider, children=Kids({1: FunctionProvider(child)})).run("delegate")
    assert result.status == "finished"
    (body,) = seen  # the record was there when the child made its first request
    (kid,) = r.ledger.children(r.scope)
    # The step is its coordinator's agent's session (issue 30: never a shared "subagent").
    assert kid.parent == r.scope.session and kid.agent == r.scope.agent == "a"
    assert body["child"] == kid.id and body["call_id"] == "run1" and body["n"] == 1
    assert body["objective"] == "write a.txt" and body["config"]["tools"] == ["Write"]
    assert r.read("a.txt") == "a\n"
    # The result is the child's answer and its receipts, read from the child's ledger.
    waited = r.ledger.entry_by_call(r.scope, "wait")
    answer = next(
        e.message.tool_result.text
        for e in r.ledger.entries(r.scope)
        if e.message.tool_result is not None and e.message.tool_result.call_id == "wait"
    )
    assert waited is not None and "finished in 2 turns" in answer and "wrote a.txt" in answer
    (write,) = [rc for rc in receipts(r.ledger, kid.scope) if rc.operation == "Write"]
    assert f"Write a.txt ok (record {write.record_id})" in answer
    # The child's proposals are bound to a sub-agent actor whose parent is the coordinator.
    assert write.actor.kind == "subagent" and write.actor.parent == r.scope.session
    (state,) = steps_of(r.ledger, r.scope)
    assert state.outcome == "finished" and state.answer == "wrote a.txt"


def test_steps_run_at_once_within_the_configured_bound(tmp_path: Path) -> None:
    # covers: WRK-1
    for parallel, expected in ((2, 2), (1, 1)):
        r = rig(tmp_path / str(parallel))
        barrier = Barrier(expected, {1: _kid("a"), 2: _kid("b"), 3: _kid("c")})
        kids = Kids({n: barrier.for_step(n) for n in (1, 2, 3)})
        runs = [{"objective": f"write {k}.txt"} for k in "abc"]
        provider = ScriptedProvider(_coordinator(*runs))
        settings = {"work": WorkSettings(parallel=parallel)}
        result = r.agent(provider, children=kids, settings_kw=settings).run("three at once")
        assert result.status == "finished", result.error
        assert barrier.peak == expected  # two met at the barrier; with one slot, never two
        assert [r.read(f"{k}.txt") for k in "abc"] == ["a\n", "b\n", "c\n"]
        events = [e.kind for e in r.ledger.records(r.scope, "event", kinds=(STARTED,))]
        assert len(events) == 3  # progress, as events in the coordinator's session


def test_a_step_gets_no_tool_and_no_permission_its_parent_lacks(tmp_path: Path) -> None:
    # covers: WRK-1, RES-6, OPS-2
    policy = Policy(mode="trusted", rules=(Rule("Write", "secret/**", "deny"),))
    r = rig(tmp_path, policy=policy)
    kid = [
        reply(
            tool("k1", "Bash", command="echo hi"),
            tool("k2", "Write", path="secret/key", content="x"),
            tool("k3", "WorkStepRun", objective="again"),
            tool("k4", "Write", path="ok.txt", content="ok\n"),
        ),
        reply(text("some were denied")),
    ]
    provider = ScriptedProvider(
        [
            reply(
                tool("wide", "WorkStepRun", objective="x", tools=["Write", "NoSuchTool"]),
                tool("own", "WorkStepRun", objective="x", tools=["WorkStepRun"]),
                tool("run1", "WorkStepRun", objective="write", tools=["Write"]),
            ),
            reply(tool("wait", "WorkStepWait")),
            reply(text("done")),
        ]
    )
    r.agent(provider, children=Kids({1: kid})).run("delegate")
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["wide"].observations["error"] == "WORK_STEP_REFUSED"
    assert made["own"].observations["error"] == "WORK_STEP_REFUSED"  # the coordinator's own
    assert len(delegations(r.ledger, r.scope)) == 1
    (child,) = r.ledger.children(r.scope)
    theirs = {rc.call_id: rc for rc in receipts(r.ledger, child.scope)}
    assert theirs["k1"].status == "denied"  # not in its tools
    assert theirs["k3"].status == "denied"
    assert theirs["k2"].status == "denied" and theirs["k2"].judgment["rule"] == "Write(secret/**)"
    assert theirs["k4"].status == "ok" and not (r.root / "secret").exists()


def test_a_step_over_its_budget_or_turns_is_incomplete_never_a_success(tmp_path: Path) -> None:
    # covers: WRK-1, WRK-3
    r = rig(tmp_path)
    spender = _kid("a", usage={"input_tokens": 4_000, "output_tokens": 100})
    looper = [reply(tool(f"b{i}", "Bash", command="true")) for i in range(3)]
    provider = ScriptedProvider(
        _coordinator(
            {"objective": "spend", "budget": 1_000},
            {"objective": "loop", "max_turns": 2},
            then=[
                reply(tool("draft", "WorkDraft", title="R", parts=[{"step": 1}])),
                # Two incomplete steps: the task closes only once both are accepted.
                reply(text("stop"), tool("fin", "finish_call", accept_incomplete=_ACCEPT)),
            ],
        )
    )
    r.agent(provider, children=Kids({1: spender, 2: looper})).run("delegate")
    first, second = steps_of(r.ledger, r.scope)
    assert (first.outcome, first.status) == ("incomplete", "budget_limited")
    assert (second.outcome, second.status) == ("incomplete", "max_turns")
    said = next(
        e.message.tool_result.text
        for e in r.ledger.entries(r.scope)
        if e.message.tool_result is not None and e.message.tool_result.call_id == "wait"
    )
    assert said.count("INCOMPLETE") == 2 and "not a success" in said
    assert "BUDGET_LIMITED" in said
    # A draft never rests on an incomplete step.
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["draft"].observations["error"] == "DRAFT_REFERENCE"


def test_a_step_whose_model_fails_is_incomplete(tmp_path: Path) -> None:
    # covers: WRK-3
    r = rig(tmp_path)
    stop = reply(text("stop"), tool("fin", "finish_call", accept_incomplete=_ACCEPT[:1]))
    provider = ScriptedProvider(_coordinator({"objective": "fail"}, then=[stop]))
    r.agent(provider, children=Kids({1: [{"error": "auth"}]})).run("delegate")
    (state,) = steps_of(r.ledger, r.scope)
    assert state.outcome == "incomplete" and state.status == "error"
    assert state.error is not None and state.error["code"]


def test_the_parent_reads_its_direct_childrens_evidence(tmp_path: Path) -> None:
    # covers: EVI-3, WRK-2
    r = rig(tmp_path)
    stranger = r.ledger.create_session("t", "a")
    stranger_entry = r.ledger.append(stranger, [Message.user("not yours")])[0]
    calls: list[str] = []

    def coordinator(req: ModelRequest) -> Any:
        calls.append(req.messages[-1].text)
        n = len(calls)
        if n == 1:
            return reply(tool("run1", "WorkStepRun", objective="write a"))
        if n == 2:
            return reply(tool("wait", "WorkStepWait"))
        if n == 3:
            # The exact call the result named for the child's answer.
            found = re.search(
                r'EvidenceRead\(session="([^"]+)", entry=(\d+), field="text"\)', calls[-1]
            )
            assert found is not None
            return reply(
                tool("ev", "EvidenceRead", session=found[1], entry=int(found[2]), field="text"),
                tool("no", "EvidenceRead", session=stranger.session, entry=stranger_entry.id),
            )
        return reply(text("read"))

    r.agent(FunctionProvider(coordinator), children=Kids({1: _kid("a")})).run("delegate")
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["ev"].status == "ok"
    assert made["no"].status == "error"  # not a direct child: refused, nothing read


def test_resume_answers_a_pending_step_from_its_record_without_a_second_child(
    tmp_path: Path,
) -> None:
    # covers: WRK-3, RES-1
    r = rig(tmp_path, probe=crash_at("delegated"))
    provider = ScriptedProvider(_coordinator({"objective": "write a"}))
    kid = ScriptedProvider(_kid("a"))
    try:
        r.agent(provider, children=Kids({1: kid})).run("delegate")
    except Crash:
        pass
    # The record and the child session are there; the child never started, the call has no
    # receipt.
    assert len(delegations(r.ledger, r.scope)) == 1 and not kid.calls
    assert not [rc for rc in receipts(r.ledger, r.scope) if rc.call_id == "run1"]
    r.house._probe = None
    again = r.agent(ScriptedProvider(_coordinator({"objective": "write a"})[1:]), probe=None)
    again.coordinator.models = Kids({1: kid})
    result = again.resume()
    assert result.status == "finished"
    assert len(r.ledger.children(r.scope)) == 1  # the same child, not a second one
    assert r.read("a.txt") == "a\n"
    kid.assert_complete()


def test_resume_never_runs_a_finished_step_again(tmp_path: Path) -> None:
    # covers: WRK-2, WRK-3
    r = rig(tmp_path, probe=crash_at("recorded"))  # after the WorkStepRun's receipt
    kid = ScriptedProvider(_kid("a"))
    try:
        r.agent(ScriptedProvider(_coordinator({"objective": "a"})), children=Kids({1: kid})).run(
            "go"
        )
    except Crash:
        pass
    # The step ran to its end while the stopped run waited for it.
    (state,) = steps_of(r.ledger, r.scope)
    assert state.outcome == "finished" and len(kid.calls) == 2
    r.house._probe = None
    script = ScriptedProvider(_coordinator({"objective": "a"})[1:])
    result = r.agent(script, children=Kids({1: kid}), probe=None).resume()
    assert result.status == "finished" and len(kid.calls) == 2  # not called again
    (child,) = r.ledger.children(r.scope)
    writes = [rc for rc in receipts(r.ledger, child.scope) if rc.operation == "Write"]
    assert [w.status for w in writes] == ["ok"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_an_interrupted_step_resumes_in_its_own_session(tmp_path: Path) -> None:
    # covers: WRK-3, RES-3, LED-3
    r = rig(tmp_path)
    kid_script = [
        reply(tool("k1", "Write", path="one.txt", content="1\n")),
        reply(tool("k2", "Write", path="two.txt", content="2\n")),
        reply(text("wrote both")),
    ]
    served: list[int] = []

    def dies(req: ModelRequest) -> Any:
        served.append(1)
        if len(served) > 1:
            raise Crash("the process stops in the middle of the step")
        return kid_script[0]

    provider = ScriptedProvider(_coordinator({"objective": "two files"}))
    first = r.agent(
        provider, children=Kids({1: FunctionProvider(dies)}), settings_kw={"max_turns": 2}
    )
    assert first.run("delegate").status == "max_turns"
    (state,) = steps_of(r.ledger, r.scope)
    assert (state.outcome, state.status) == ("unfinished", "interrupted")  # never a success
    # The next process: the step resumes in its own session, where its ledger stopped.
    rest = ScriptedProvider(kid_script[1:])
    resumed = r.agent(
        ScriptedProvider(_coordinator({"objective": "x"})[1:]), children=Kids({1: rest})
    )
    assert resumed.resume().status == "finished"
    (state,) = steps_of(r.ledger, r.scope)
    assert state.outcome == "finished" and state.answer == "wrote both"
    assert r.read("one.txt") == "1\n" and r.read("two.txt") == "2\n"
    assert len(r.ledger.records(r.scope, "event", kinds=(STARTED,))) == 2
    (child,) = r.ledger.children(r.scope)
    writes = [
        (rc.call_id, rc.status) for rc in receipts(r.ledger, child.scope) if rc.operation == "Write"
    ]
    assert writes == [("k1", "ok"), ("k2", "ok")]
    rest.assert_complete()


def test_steps_run_at_once_on_every_backend(any_ledger: LedgerBackend, tmp_path: Path) -> None:
    # covers: WRK-1, WRK-4, LED-4
    root = tmp_path / "ws"
    root.mkdir()
    scope = any_ledger.create_session("t", "a")
    house = House.of(
        any_ledger, scope, default_registry(), Policy(mode="trusted"), workspace=Workspace(root)
    )
    barrier = Barrier(2, {1: _kid("a"), 2: _kid("b")})
    kids = Kids({n: barrier.for_step(n) for n in (1, 2)})
    draft = tool("d", "WorkDraft", title="Both", parts=[{"step": 1}, {"step": 2}])
    provider = ScriptedProvider(
        _coordinator({"objective": "a"}, {"objective": "b"}, then=[reply(draft), reply(text("ok"))])
    )
    agent = Agent(any_ledger, scope, provider, house, settings_for(), children=kids)
    with lock_session(any_ledger, scope):
        result = agent.run("two at once")
    assert result.status == "finished" and barrier.peak == 2
    assert [s.outcome for s in steps_of(any_ledger, scope)] == ["finished", "finished"]
    (made,) = drafts_of(any_ledger, scope)
    assert render_draft(any_ledger, scope, made) == "# Both\n\nwrote a.txt\n\nwrote b.txt"
    assert (root / "a.txt").read_text() == "a\n" and (root / "b.txt").read_text() == "b\n"
