"""The loop's side of stopping and steering (DRV-2, DRV-3), on the one agent factory (Runtime)
with a real house: a message queued in the ledger survives the process that queued it and goes
in exactly once, before a new prompt; a stop during a step answers its calls that never
started ("not run", never run later on their own) and tells the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from comal.agent import Config, Flags, Runtime, Watch, enqueue, pending_messages
from comal.ledger import open_ledger
from comal.messages import Role
from comal.ops import Actor, StopSignal, receipts, sandbox_status
from comal.providers import ModelRequest
from comal.testing import FunctionProvider, ScriptedProvider

ANA = Actor.user("ana")


def _say(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def _runtime(tmp_path: Path, provider: Any) -> Runtime:
    led = open_ledger(tmp_path / "steer.db")
    flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=32_000, workspace=tmp_path)
    rt = Runtime.open(led, flags, config=Config(mode="trusted", agent="steer"), provider=provider)
    rt.user = "ana"
    return rt


def _users(req: ModelRequest) -> list[str]:
    return [m.text.rsplit("\n", 1)[-1] for m in req.messages if m.role is Role.USER]


def test_a_queued_message_outlives_its_process_and_goes_in_once(tmp_path: Path) -> None:
    # covers: DRV-3, RES-1
    provider = ScriptedProvider([_say("Hello."), _say("Docs noted."), _say("Tests too.")])
    rt = _runtime(tmp_path, provider)
    try:
        rt.run("hello")
        scope = rt.need_scope()
        assert rt.ledger.session(scope).status == "finished"  # type: ignore[union-attr]
        # Queued by a process that is gone (a web worker killed before any agent took it).
        enqueue(rt.ledger, scope, "also the docs", mode="queue", by=ANA, channel="web")
        assert [q.prompt for q in pending_messages(rt.ledger, scope)] == ["also the docs"]
        # A resume with no prompt reopens the finished session for it.
        assert rt.run(None).status == "finished"
        assert _users(provider.calls[1])[-1] == "also the docs"
        # Queued again, then a new prompt: the older message goes in first.
        enqueue(rt.ledger, scope, "and the tests", by=ANA, channel="tui")
        rt.run("anything else?")
        assert _users(provider.calls[2])[-2:] == ["and the tests", "anything else?"]
        # Each went in once: a run with nothing queued calls nothing.
        assert rt.run(None).status == "finished" and len(provider.calls) == 3
        delivered = rt.ledger.records(scope, "event", kinds=("prompt_delivered",))
        assert len(delivered) == 2 and pending_messages(rt.ledger, scope) == []
        provider.assert_complete()
    finally:
        rt.close()
        rt.ledger.close()


@pytest.mark.skipif(
    not sandbox_status().available,
    reason=f"Bash runs in the OS sandbox, not usable here: {sandbox_status().reason}",
)
def test_a_stop_answers_the_calls_that_never_started(tmp_path: Path) -> None:
    # covers: DRV-2, RES-4
    # The model proposes two commands; the first is stopped while it runs: the second never
    # starts, gets a "not run" result (it may be proposed again), and no later run starts it.
    stop = StopSignal()

    def model(req: ModelRequest) -> dict[str, Any]:
        if len(provider.calls) == 1:
            first = {"command": "echo first; sleep 30"}
            second = {"command": "echo second > second.txt"}
            calls = [
                {"type": "tool_use", "id": "b1", "name": "Bash", "input": first},
                {"type": "tool_use", "id": "b2", "name": "Bash", "input": second},
            ]
            return {"content": calls, "stop_reason": "tool_use"}
        return _say("Stopped.")

    def output(call_id: str, stream: str, text: str) -> None:
        if "first" in text:
            stop.request("the user ana")

    provider = FunctionProvider(model)
    rt = _runtime(tmp_path, provider)
    try:
        result = rt.run("two things", watch=Watch(stop, output))
        assert result.error is not None and result.error["code"] == "INTERRUPTED"
        scope = rt.need_scope()
        by_call = {r.call_id: r for r in receipts(rt.ledger, scope)}
        assert (by_call["b1"].status, by_call["b1"].disposition) == ("interrupted", "basket")
        assert (by_call["b2"].status, by_call["b2"].disposition) == ("interrupted", "repeat")
        assert by_call["b2"].observations["started"] is False
        assert not (tmp_path / "second.txt").exists()
        stopped = rt.ledger.records(scope, "event", kinds=("interrupted",))
        assert [e.body["not_run"] for e in stopped] == [["b2"]]
        # The next run sends the model both results and comal's word, and runs neither again.
        stop.clear()
        rt.run("what now?", watch=Watch(stop))
        sent = provider.calls[1].messages
        results = {m.tool_result.call_id: m.text for m in sent if m.tool_result is not None}
        assert results["b2"].startswith("[not run: the user ana interrupted the run")
        assert "[interrupted by the user ana after " in results["b1"]
        assert not (tmp_path / "second.txt").exists()
        assert len([r for r in receipts(rt.ledger, scope) if r.operation == "Bash"]) == 2
    finally:
        rt.close()
        rt.ledger.close()
