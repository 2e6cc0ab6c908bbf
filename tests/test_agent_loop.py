"""The turn loop in process: steps, receipts, usage, length outcomes, checks, children."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _agent_support import (
    MODEL,
    TASK,
    TASK_ANSWER,
    TASK_CHECKS,
    TASK_FILES,
    reply,
    rig,
    text,
    tool,
)
from comal.agent import (
    CONTEXT_EVENT,
    INCOMPLETE_EVENT,
    RepeatedContextLength,
    RepeatedOutputLength,
    Spend,
    SpendCapExceeded,
    SpendCaps,
    answer_of,
    check_spend,
    spent,
)
from comal.agent._catalog import model_catalog
from comal.context import get_engine
from comal.errors import ContextLength, OutputLength
from comal.ledger import Scope, UsageInput
from comal.messages import Message, Role, ToolCall, message_to_dict, open_calls
from comal.ops import Policy, Rule, receipts
from comal.providers import OUTPUT_LENGTH, ModelRequest, ModelResponse
from comal.testing import FunctionProvider, ScriptedProvider
from comal.tokens import Usage

# The model catalog the agent sends under the default engine (recall tools of other engines
# are not offered).
LIMIT = get_engine("limit")


def test_tool_loop_runs_calls_through_the_house_and_records_usage(tmp_path: Path) -> None:
    # covers: OPS-3, TOK-2, RES-5, OUT-2
    r = rig(tmp_path)
    provider = ScriptedProvider(TASK)
    result = r.agent(provider, settings_kw={"checks": TASK_CHECKS}).run("Do the task.")
    provider.assert_complete()
    assert result.status == "finished" and result.answer == TASK_ANSWER
    assert {n: r.read(n) for n in TASK_FILES} == TASK_FILES
    assert not (r.root / "poison.txt").exists()
    assert r.ledger.session(r.scope).status == "finished"  # type: ignore[union-attr]
    entries = r.ledger.entries(r.scope)
    assert not open_calls(e.message for e in entries)
    assert "p1" not in {c.id for e in entries for c in e.message.tool_calls}
    by_call = {rc.call_id: rc for rc in result.receipts}
    assert set(by_call) >= {"w1", "b1", "e1", "w2", "e2", "b2"}
    assert all(rc.status == "ok" for rc in result.receipts)
    assert by_call["w1"].actor.kind == "user"  # bound to the host's user, never the model
    requests = r.ledger.requests(r.scope)
    assert len(requests) == len(TASK) == result.usage["requests"]
    first = requests[0]
    assert (first.model, first.protocol, first.new_input, first.output) == (
        MODEL,
        "scripted",
        1200,
        40,
    )
    for key in ("anchor_model", "effort", "catalog_digest", "config_digest", "checkpoint_id"):
        assert key in first.meta
    # The catalog the model was offered: the house's, less other engines' recall tools.
    offered = model_catalog(r.house.catalog("model"), get_engine("limit"))
    assert first.meta["catalog_digest"] == offered.digest
    assert first.entry_id == entries[1].id  # the usage anchors the assistant entry it produced
    assert requests[2].entry_id is None and requests[2].meta["incomplete"] == OUTPUT_LENGTH
    # The request after the measured one is budgeted from the measurement (TOK-2).
    assert requests[1].meta["estimate"]["measured"] is True


def test_output_length_is_discarded_and_retried_with_a_larger_reserve(tmp_path: Path) -> None:
    # covers: OUT-2, OUT-3, OUT-1
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(tool("p1", "Write", path="poison.txt", content="x"), stop_reason="max_tokens"),
            reply(text("Short answer.")),
        ]
    )
    result = r.agent(provider).run("Write a long file.")
    assert result.status == "finished" and result.answer == "Short answer."
    assert not (r.root / "poison.txt").exists()
    first, second = provider.calls
    assert first.messages == second.messages  # the same input: nothing compacted for it
    assert second.max_output_tokens == 2 * first.max_output_tokens
    assert r.ledger.checkpoints(r.scope) == []
    (event,) = [e for e in r.ledger.records(r.scope, "event") if e.kind == INCOMPLETE_EVENT]
    assert event.body["discarded_calls"] == [{"id": "p1", "name": "Write"}]
    assert event.body["stop"] == OUTPUT_LENGTH and event.body["message"]["parts"]
    assert [e.role for e in r.ledger.entries(r.scope)] == ["user", "assistant"]
    assert "p1" not in {rc.call_id for rc in receipts(r.ledger, r.scope)}


def test_regression_identical_request_retried_in_a_loop_after_output_length(
    tmp_path: Path,
) -> None:
    # covers: OUT-3
    # Peer report: after OUTPUT_LENGTH an agent re-sent the very same request, got the same
    # truncation, and looped. Here the retry changes the reserve, and a second OUTPUT_LENGTH at
    # the same point is a coded error — also for a process that resumes the session later.
    r = rig(tmp_path)
    cut = reply(text("1, 2, 3,"), stop_reason="max_tokens")
    provider = ScriptedProvider([cut, cut, cut])
    with pytest.raises(RepeatedOutputLength) as caught:
        r.agent(provider).run("Count to a million.")
    assert isinstance(caught.value, OutputLength) and caught.value.code == "OUTPUT_LENGTH"
    assert len(provider.calls) == 2 and provider.remaining == 1
    assert provider.calls[1].max_output_tokens > provider.calls[0].max_output_tokens
    again = ScriptedProvider([cut])
    with pytest.raises(RepeatedOutputLength):
        r.agent(again).resume()
    assert again.calls == []  # nothing is sent again from the same point
    result = r.agent(ScriptedProvider([reply(text("1 to 10 only."))])).run("Just to ten.")
    assert result.status == "finished"  # a new prompt is a new point: the streak is over


def test_regression_truncated_partial_tool_call_is_never_executed(tmp_path: Path) -> None:
    # covers: OUT-2
    # Peer report (NousResearch/hermes-agent #72770): a response cut off by max_tokens in the
    # middle of a tool call had its partial call executed. The cut call here would truncate a
    # file; it must never reach the house.
    r = rig(tmp_path)
    (r.root / "keep.txt").write_text("precious\n")
    cut = ToolCall("t1", "Write", '{"path": "keep.txt", "content": "')
    partial = ModelResponse(
        Message(Role.ASSISTANT, (cut,)),
        OUTPUT_LENGTH,
        Usage(100, None, None, 4096, None),
        model=MODEL,
        raw_stop="max_tokens",
    )
    provider = ScriptedProvider([partial, reply(text("I will write it in parts."))])
    r.agent(provider).run("Rewrite keep.txt.")
    assert r.read("keep.txt") == "precious\n"
    assert receipts(r.ledger, r.scope) == []
    assert r.ledger.records(r.scope, "preparation") == []


def test_context_length_recalibrates_once_then_is_a_coded_error(tmp_path: Path) -> None:
    # covers: OUT-1, TOK-4
    r = rig(tmp_path)
    provider = ScriptedProvider([{"error": "context_length"}, reply(text("Fits now."))])
    result = r.agent(provider).run("Summarise everything.")
    assert result.status == "finished" and len(provider.calls) == 2
    (event,) = [e for e in r.ledger.records(r.scope, "event") if e.kind == CONTEXT_EVENT]
    assert event.body["reported"] == {"input": 210345, "limit": 200000}
    assert event.body["next_window"] < event.body["window"]
    assert "210,345" in event.body["reason"]
    failed, answered = r.ledger.requests(r.scope)
    assert failed.meta["error"] == "CONTEXT_LENGTH" and failed.new_input is None
    assert answered.meta["window"] == event.body["next_window"]
    # The calibration stays for the session's next turns.
    nxt = ScriptedProvider([reply(text("ok"))])
    r.agent(nxt).run("And now?")
    assert r.ledger.requests(r.scope)[-1].meta["window"] == event.body["next_window"]
    s = rig(tmp_path / "two")
    twice = ScriptedProvider([{"error": "context_length"}, {"error": "context_length"}])
    with pytest.raises(RepeatedContextLength) as caught:
        s.agent(twice).run("Too big.")
    assert isinstance(caught.value, ContextLength) and caught.value.code == "CONTEXT_LENGTH"
    assert len(twice.calls) == 2


def test_a_stop_without_a_reason_is_recorded_and_stops(tmp_path: Path) -> None:
    # covers: OUT-1, OUT-2
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [reply(tool("x", "Write", path="p", content="x"), stop_reason="pause_turn")]
    )
    with pytest.raises(Exception) as caught:
        r.agent(provider).run("go")
    assert getattr(caught.value, "code", None) == "INCOMPLETE_RESPONSE"
    assert not (r.root / "p").exists()


def test_max_turns_stops_and_a_resume_continues(tmp_path: Path) -> None:
    # covers: RES-1
    r = rig(tmp_path)
    script = [reply(tool(f"b{i}", "Bash", command="true")) for i in range(3)]
    provider = ScriptedProvider([*script, reply(text("done"))])
    first = r.agent(provider, settings_kw={"max_turns": 2}).run("loop")
    assert (first.status, first.turns) == ("max_turns", 2)
    assert r.ledger.session(r.scope).status == "active"  # type: ignore[union-attr]
    second = r.agent(provider, settings_kw={"max_turns": 5}).resume()
    assert (second.status, second.turns, second.answer) == ("finished", 2, "done")
    provider.assert_complete()


def test_failing_checks_keep_the_session_open_and_tell_the_model(tmp_path: Path) -> None:
    # covers: RES-5
    r = rig(tmp_path)
    provider = ScriptedProvider(
        [
            reply(text("Done (I think).")),
            reply(tool("w", "Write", path="ok.txt", content="ok\n")),
            reply(text("Now really done.")),
        ]
    )
    agent = r.agent(provider, settings_kw={"checks": ("test -f ok.txt",)})
    result = agent.run("Make ok.txt.")
    assert result.status == "finished" and result.answer == "Now really done."
    told = provider.calls[1].messages[-1]
    assert told.role is Role.USER and "test -f ok.txt" in told.text and "[exit code 1]" in told.text
    checks = [e for e in r.ledger.records(r.scope, "event") if e.kind == "finish_checks"]
    assert [c.body["passed"] for c in checks] == [False, True]
    check_receipts = [rc for rc in receipts(r.ledger, r.scope) if rc.call_id.startswith("check-")]
    assert [rc.actor.kind for rc in check_receipts] == ["operator", "operator"]
    assert {rc.surface for rc in check_receipts} == {"api"}


def test_a_denied_check_never_closes_the_session(tmp_path: Path) -> None:
    # covers: RES-5, OPS-1
    policy = Policy(mode="trusted", rules=(Rule("Bash", "rm *", "deny"),))
    r = rig(tmp_path, policy=policy)
    provider = ScriptedProvider([reply(text("done"))])
    settings = {"checks": ("rm -rf build", "true"), "max_turns": 1}
    result = r.agent(provider, settings_kw=settings).run("x")
    assert result.status == "max_turns"
    assert r.ledger.session(r.scope).status == "active"  # type: ignore[union-attr]
    # The two checks, then the finish_call they ran in (an error: one was denied).
    made = [(rc.operation, rc.status) for rc in receipts(r.ledger, r.scope)]
    assert made == [("Bash", "denied"), ("Bash", "ok"), ("finish_call", "error")]
    assert "denied by the rule Bash(rm *)" in r.ledger.entries(r.scope)[-1].message.text


def test_a_finished_session_is_not_sent_to_the_model_again(tmp_path: Path) -> None:
    # covers: RES-1, RES-5
    r = rig(tmp_path)
    r.agent(ScriptedProvider([reply(text("All good."))])).run("check")
    nothing = ScriptedProvider([])
    result = r.agent(nothing).resume()
    assert (result.status, result.answer, result.turns) == ("finished", "All good.", 0)
    assert nothing.calls == []
    assert answer_of(r.ledger, r.scope) == "All good."


def test_sub_agents_run_in_child_sessions(tmp_path: Path) -> None:
    # covers: LED-3
    r = rig(tmp_path)
    parent = r.agent(ScriptedProvider([]))
    child = parent.spawn_child(
        title="helper",
        provider=ScriptedProvider(
            [reply(tool("c1", "Write", path="c.txt", content="c")), reply(text("child done"))]
        ),
    )
    result = child.run("write c.txt")
    info = r.ledger.session(child.scope)
    assert info is not None and info.parent == r.scope.session and info.agent == r.scope.agent
    assert result.answer == "child done" and r.read("c.txt") == "c"
    (rc,) = [x for x in receipts(r.ledger, child.scope) if x.call_id == "c1"]
    assert rc.actor.kind == "subagent" and rc.actor.parent == r.scope.session
    assert [c.id for c in r.ledger.children(r.scope)] == [child.scope.session]


def test_a_checkpoint_is_stored_before_the_request_is_sent(tmp_path: Path) -> None:
    # covers: LIM-3, LIM-1, TOK-4
    r = rig(tmp_path)
    seen: list[int] = []

    def answer(req: ModelRequest) -> ModelResponse | dict[str, object]:
        seen.append(len(r.ledger.checkpoints(r.scope)))
        n = len(seen)
        if n < 30:
            return reply(tool(f"b{n}", "Bash", command=f"seq 1 {40 + n}"))
        return reply(text("done"))

    provider = FunctionProvider(answer)
    result = r.agent(provider, settings_kw={"context_window": 6_000}).run("print numbers")
    assert result.status == "finished"
    assert r.ledger.checkpoints(r.scope), "the small window never made the engine derive"
    first = next(i for i, n in enumerate(seen) if n)
    # The request that needed the checkpoint already found it stored in the ledger.
    assert any("Deterministic checkpoint" in m.text for m in provider.calls[first].messages)


def test_the_cached_prefix_holds_across_turns(tmp_path: Path) -> None:
    # covers: CCH-1
    r = rig(tmp_path)
    provider = ScriptedProvider([reply(tool("b", "Bash", command="true")), reply(text("ok"))])
    r.agent(provider, settings_kw={"preamble": True}).run("hello")
    one, two = provider.calls
    assert (one.system, one.tools) == (two.system, two.tools)
    assert "date:" not in one.system  # the dynamic part rides with the user message
    assert "<context>" in one.messages[0].text and "hello" in one.messages[0].text
    assert [message_to_dict(m) for m in two.messages[: len(one.messages)]] == [
        message_to_dict(m) for m in one.messages
    ]


def test_compact_requested_waits_for_the_next_turn(tmp_path: Path) -> None:
    # covers: LIM-7
    r = rig(tmp_path)
    # Outputs long enough that a checkpoint is smaller than they are (one that is not, is
    # not stored).
    script = [reply(tool(f"b{i}", "Bash", command=f"seq {i} 400")) for i in range(7)]
    agent = r.agent(ScriptedProvider([*script, reply(text("done"))]))
    agent.request_compact()
    assert r.ledger.checkpoints(r.scope) == []  # nothing happens while no turn runs
    agent.run("go")
    assert r.ledger.checkpoints(r.scope) == []  # the first turn had nothing to cover
    agent2 = r.agent(ScriptedProvider([reply(text("again"))]))
    agent2.request_compact()
    agent2.run("once more")
    (cp,) = r.ledger.checkpoints(r.scope)
    assert cp.meta.get("requested") == "compact"
    assert agent2.last_proposal is not None
    assert agent2.last_proposal.assembly.messages[1].text.startswith("Deterministic checkpoint")


def test_spend_tiers_sum_the_tenant_request_records(tmp_path: Path) -> None:
    # covers: TOK-6, TOK-1
    r = rig(tmp_path)
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)

    def record(scope: Scope, tokens: int, at: datetime | None, run: str = "old") -> None:
        meta: dict[str, object] = {"run": run}
        if at is not None:
            meta["at"] = at.isoformat()
        usage = Usage(tokens, None, None, 10, None)
        r.ledger.record_request(scope, None, UsageInput(usage, "m", "anthropic", meta))

    mine = r.scope
    other = r.ledger.create_session("t", "b")
    stranger = r.ledger.create_session("another-tenant", "a")
    record(mine, 1_000, now - timedelta(minutes=5), run="this")
    record(other, 2_000, now - timedelta(minutes=50))
    record(other, 4_000, now - timedelta(hours=5))
    record(other, 8_000, now - timedelta(days=2))  # outside every window
    record(other, 16_000, None)  # imported usage: spent elsewhere, not dated
    record(stranger, 32_000, now)  # another tenant
    sums = spent(r.ledger, "t", "this", now=now)
    assert sums == Spend(execution=1_010, hour=3_020, day=7_030)
    caps = SpendCaps(execution=10_000, hour=5_000, day=100_000)
    check_spend(r.ledger, mine, caps, run="this", next_tokens=1_000, now=now)
    with pytest.raises(SpendCapExceeded) as caught:
        check_spend(r.ledger, mine, caps, run="this", next_tokens=2_000, now=now)
    assert (caught.value.tier, caught.value.spent, caught.value.projected) == ("hour", 3_020, 2_000)
    assert "spend.hour" in str(caught.value)
    with pytest.raises(SpendCapExceeded, match="execution cap"):
        check_spend(r.ledger, mine, caps, run="this", next_tokens=9_000, now=now)
