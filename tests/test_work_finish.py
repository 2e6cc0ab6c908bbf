"""finish_call and the task's budget (WRK-5, RES-5), and drafts by reference (WRK-4)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from _agent_support import Crash, reply, rig, text, tool
from _work_support import Kids
from comal.agent import TaskBudget, answer_of
from comal.messages import sha256_hex
from comal.ops import receipts
from comal.providers import ModelRequest
from comal.testing import FunctionProvider, ScriptedProvider
from comal.work import BUDGET_EVENT, DRAFT, board_of, drafts_of, render_draft


def _result(r: Any, call_id: str) -> str:
    return next(
        e.message.tool_result.text
        for e in r.ledger.entries(r.scope)
        if e.message.tool_result is not None and e.message.tool_result.call_id == call_id
    )


def test_finish_call_runs_the_configured_checks_and_every_board_check(tmp_path: Path) -> None:
    # covers: WRK-5, RES-5, BRD-3
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(tool("a1", "BoardAdd", text="ok.txt says ok", check="grep -qx ok ok.txt")),
            reply(tool("f1", "finish_call")),  # too early: the item is open, ok.txt is missing
            reply(tool("w", "Write", path="ok.txt", content="ok\n")),
            reply(tool("d1", "BoardUpdate", item=1, status="done")),
            reply(text("All done."), tool("f2", "finish_call")),
        ]
    )
    result = r.agent(provider, settings_kw={"checks": ("test -f ok.txt",)}).run("make ok.txt")
    assert result.status == "finished" and result.answer == "All done."
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    early, final = made["f1"], made["f2"]
    assert early.status == "error" and early.observations["passed"] is False
    assert early.observations["open"] == [1]
    told = _result(r, "f1")
    assert told.startswith("[finish] NOT finished") and "board #1 is pending" in told
    assert final.status == "ok" and final.observations["passed"] is True
    (configured,) = final.observations["checks"]
    check = next(rc for rc in receipts(r.ledger, r.scope) if rc.record_id == configured["receipt"])
    assert check.actor.kind == "operator" and check.surface == "api"  # the operator's own
    (checked,) = final.observations["board"]
    assert checked["op"] == "checked" and checked["passed"] is True
    assert [i.status for i in board_of(r.ledger, r.scope).items] == ["verified"]
    assert r.ledger.session(r.scope).status == "finished"  # type: ignore[union-attr]


def test_finish_call_comes_alone(tmp_path: Path) -> None:
    # covers: WRK-5
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(tool("w", "Write", path="x.txt", content="x"), tool("f", "finish_call")),
            reply(text("done")),
        ]
    )
    assert r.agent(provider).run("x").status == "finished"  # by the house, when it answered
    made = {rc.call_id: rc for rc in receipts(r.ledger, r.scope)}
    assert made["f"].observations["error"] == "FINISH_ALONE"
    finishes = [rc for rc in receipts(r.ledger, r.scope) if rc.operation == "finish_call"]
    # With nothing to verify, the house's own finish passes without a call of its own.
    assert [(f.surface, f.status) for f in finishes] == [("model", "error")]


def test_finish_waits_for_the_steps_still_running(tmp_path: Path) -> None:
    # covers: WRK-5, WRK-1
    r = rig(tmp_path)
    release = threading.Event()
    kid = ScriptedProvider([reply(text("slow step done"))])

    def slow(req: ModelRequest) -> Any:
        assert release.wait(20)
        return kid.request(req)

    def coordinator(req: ModelRequest) -> Any:
        n = len(calls)
        calls.append(req)
        if n == 0:
            return reply(tool("run1", "WorkStepRun", objective="slow"))
        if n == 1:
            return reply(tool("f1", "finish_call"))
        if n == 2:
            release.set()  # the finish was refused while the step ran; let it end now
            return reply(tool("wait", "WorkStepWait"))
        return reply(text("done"), tool("f2", "finish_call"))

    calls: list[ModelRequest] = []
    result = r.agent(FunctionProvider(coordinator), children=Kids({1: FunctionProvider(slow)}))
    assert result.run("go").status == "finished"
    told = _result(r, "f1")
    assert told.startswith("[finish] NOT finished: work steps are not done yet")
    assert "WorkStepWait" in told


def test_a_recovered_answer_is_not_finished_until_finish_call_passes(tmp_path: Path) -> None:
    # covers: RES-5, WRK-5, RES-1
    crashed = {"at": 0}

    def probe(phase: str, detail: str) -> None:
        if phase == "appended":
            crashed["at"] += 1
            if crashed["at"] == 2:  # the answer is stored; the process dies before any finish
                raise Crash(detail)

    r = rig(tmp_path, probe=probe)
    script = [reply(tool("w", "Write", path="x.txt", content="x\n")), reply(text("x is written"))]
    try:
        r.agent(ScriptedProvider(script), settings_kw={"checks": ("test -f y.txt",)}).run("x")
    except Crash:
        pass
    assert answer_of(r.ledger, r.scope) == "x is written"  # recovered from the ledger...
    assert r.ledger.session(r.scope).status == "active"  # type: ignore[union-attr]
    # ... and a resume without a new prompt runs finish_call before anything closes: it fails.
    fixer = ScriptedProvider(
        [reply(tool("y", "Write", path="y.txt", content="y\n")), reply(text("y too"))]
    )
    result = r.agent(fixer, settings_kw={"checks": ("test -f y.txt",)}, probe=None).resume()
    assert result.status == "finished" and result.answer == "y too"
    finishes = [rc.status for rc in receipts(r.ledger, r.scope) if rc.operation == "finish_call"]
    assert finishes == ["error", "ok"]


def test_over_the_tasks_budget_the_session_stops_budget_limited(tmp_path: Path) -> None:
    # covers: WRK-5, BRD-2
    r = rig(tmp_path)
    spend = {"input_tokens": 1_500, "output_tokens": 100}
    provider = ScriptedProvider(
        [
            reply(
                tool("a1", "BoardAdd", text="first"),
                tool("a2", "BoardAdd", text="second"),
                usage=spend,
            ),
            reply(tool("d1", "BoardUpdate", item=1, status="done"), usage=spend),
            reply(text("never sent")),
        ]
    )
    budget = {"budget": TaskBudget(tokens=3_000)}
    result = r.agent(provider, settings_kw=budget).run("two things")
    assert result.status == "budget_limited" and len(provider.calls) == 2
    assert result.error is not None and result.error["code"] == "BUDGET_LIMITED"
    assert "board #2 [pending] second" in result.error["message"]  # what remains
    (stopped,) = r.ledger.records(r.scope, "event", kinds=(BUDGET_EVENT,))
    assert stopped.body["spent"]["tokens"] == 3_200 and stopped.body["remains"]
    board = board_of(r.ledger, r.scope)
    assert [i.status for i in board.items] == ["done", "pending"]  # kept as it was
    assert r.ledger.session(r.scope).status == "active"  # type: ignore[union-attr]
    # Resumed under the same budget: still over, the model is not called.
    again = r.agent(provider, settings_kw=budget).resume()
    assert again.status == "budget_limited" and len(provider.calls) == 2
    # The operator raises the budget: the task goes on.
    more = ScriptedProvider(
        [reply(tool("d2", "BoardUpdate", item=2, status="done")), reply(text("both done"))]
    )
    raised = {"budget": TaskBudget(tokens=50_000)}
    assert r.agent(more, settings_kw=raised).resume().status == "finished"


def test_the_budget_counts_the_work_steps_turns(tmp_path: Path) -> None:
    # covers: WRK-5, WRK-1
    r = rig(tmp_path)
    kid = [reply(tool("k", "Write", path="k.txt", content="k\n")), reply(text("k done"))]
    provider = ScriptedProvider(
        [
            reply(tool("run1", "WorkStepRun", objective="k")),
            reply(tool("wait", "WorkStepWait")),
            reply(text("never sent")),
        ]
    )
    result = r.agent(
        provider, children=Kids({1: kid}), settings_kw={"budget": TaskBudget(turns=4)}
    ).run("k")
    assert result.status == "budget_limited" and len(provider.calls) == 2
    (stopped,) = r.ledger.records(r.scope, "event", kinds=(BUDGET_EVENT,))
    assert stopped.body["spent"]["turns"] == 4  # two of the coordinator, two of its step


def test_a_draft_is_stored_once_by_reference_and_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    # covers: WRK-4, EVI-3
    crashes = {"n": 0}

    def probe(phase: str, detail: str) -> None:
        if (phase, detail) == ("executed", "draft") and not crashes["n"]:
            crashes["n"] += 1
            raise Crash("after the draft's record, before its receipt")

    r = rig(tmp_path, probe=probe)
    kid1 = [reply(tool("k", "Write", path="a.txt", content="a\n")), reply(text("A: a.txt written"))]
    kid2 = [reply(text("B: nothing to write"))]
    parts = [{"text": "Report:"}, {"step": 1}, {"step": 2}, {"step": 1, "entry": 3}]
    script = [
        reply(
            tool("run1", "WorkStepRun", objective="a"), tool("run2", "WorkStepRun", objective="b")
        ),
        reply(tool("wait", "WorkStepWait")),
        reply(tool("draft", "WorkDraft", title="Report", parts=parts)),
        reply(tool("draft2", "WorkDraft", title="Report", parts=parts[:2])),
        reply(text("drafted")),
    ]
    kids = Kids({1: kid1, 2: kid2})
    try:
        r.agent(ScriptedProvider(script), children=kids).run("report")
    except Crash:
        pass
    r.house._probe = None
    result = r.agent(ScriptedProvider(script[3:]), children=kids, probe=None).resume()
    assert result.status == "finished"
    first, second = drafts_of(r.ledger, r.scope)
    assert (first.call_id, first.version, second.version) == ("draft", 1, 2)  # one record each
    assert len(r.ledger.records(r.scope, "event", kinds=(DRAFT,))) == 2
    # The record holds references and digests, never the children's text.
    assert [set(p) for p in first.parts] == [{"text"}] + [
        {"n", "child", "entry", "sha256", "chars"}
    ] * 3
    text_of = render_draft(r.ledger, r.scope, first)
    assert text_of.startswith("# Report\n\nReport:\n\nA: a.txt written\n\nB: nothing to write")
    assert sha256_hex(text_of) == first.sha256
    shown = _result(r, "draft")  # the call answered again after the crash, from the record
    assert shown.endswith(text_of) and text_of.count("A: a.txt written") == 1
