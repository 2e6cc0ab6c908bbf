"""The Agents SDK's Session contract, held by ComalSession: exact round trips, limits, pop and
clear over an append-only ledger, one list of items given to two sessions, and sessions side
by side on one ledger. The Runner is the SDK's own, its model the SDK's ScriptedModel."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, RunConfig, Runner, SessionSettings, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message

from _integration_support import output
from comal.integrations import BRANCH_EVENT, ComalSession
from comal.integrations._openai_agents import CLEAR_EVENT, POP_EVENT
from comal.ledger import LedgerBackend

# Items as the SDK and its users write them: string and list content, ids and statuses, an
# assistant message with annotations, a call and its output, reasoning with encrypted bytes, a
# hosted tool's item comal does not read, text a lossy path would change.
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Hello — résumé\u202e \x00 ok  "},
    {"role": "assistant", "content": "Hi there!"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"}]},
    {
        "id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Sure.", "annotations": []}],
    },
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA=="},
    {
        "type": "function_call", "id": "fc_1", "call_id": "c1", "name": "run_job",
        "arguments": '{"n":  1}', "status": "completed",
    },
    {"type": "function_call_output", "call_id": "c1", "output": "job 1 ok\n"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "x"}},
    {"role": "user", "content": "Привет 😊"},
]  # fmt: skip


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _texts(items: list[Any]) -> list[str]:
    return [json.dumps(i, ensure_ascii=False) for i in items]


def _agent(model: ScriptedModel) -> Agent[Any]:
    set_tracing_disabled(True)
    return Agent(name="test", model=model)


def _said(text: str) -> list[Any]:
    return [assistant_message(text)]


def test_items_come_back_exactly_as_they_were_given(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    session = ComalSession(ledger)
    given = copy.deepcopy(ITEMS)
    _run(session.add_items(given))
    assert given == ITEMS  # the caller's items are not changed
    back = _run(session.get_items())
    assert back == ITEMS
    # Byte for byte: the same JSON text, keys in the order they were given.
    assert _texts(back) == _texts(ITEMS)
    # A new object on the same session id reads the same items back.
    again = ComalSession(ledger, session=session.session_id)
    assert _texts(_run(again.get_items())) == _texts(ITEMS)
    # The ledger holds them as entries too (what the engine assembles and `comal show` prints),
    # and the output byte for byte.
    entries = session.comal.entries()
    assert [e.role for e in entries][:2] == ["user", "assistant"]
    results = [e.message.tool_result for e in entries if e.message.tool_result is not None]
    assert [r.text for r in results] == ["job 1 ok\n"]


def test_runner_sends_the_stored_items_and_its_new_input_unchanged(ledger: LedgerBackend) -> None:
    # covers: INT-1
    for config in (None, "comal"):
        session = ComalSession(ledger)
        history = [
            {"role": "user", "content": "Earlier"},
            {"role": "assistant", "content": "Saved"},
        ]
        _run(session.add_items(history))
        model = ScriptedModel([_said("ok")])
        run_config = session.run_config() if config else None
        new = [{"role": "user", "content": "Now"}]
        _run(Runner.run(_agent(model), new, session=session, run_config=run_config))
        # With comal's filter or without it, the model is sent what the SDK's own sessions send.
        assert model.calls[-1].input == history + new
        stored = _run(session.get_items())
        assert stored[:3] == history + new
        assert stored[3]["role"] == "assistant"


def test_limits_return_the_latest_items_orphans_included(ledger: LedgerBackend) -> None:
    # covers: INT-1
    session = ComalSession(ledger)
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "run_job", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
    ]
    _run(session.add_items(items))
    # The latest N items, a leading output whose call was cut off included: the SDK drops
    # orphans itself.
    assert _run(session.get_items(limit=1)) == items[-1:]
    assert _run(session.get_items(limit=2)) == items[-2:]
    assert _run(session.get_items(limit=10)) == items
    assert _run(session.get_items(limit=0)) == []


def test_session_settings_are_the_sdks(ledger: LedgerBackend) -> None:
    # covers: INT-1
    default = ComalSession(ledger)
    assert isinstance(default.session_settings, SessionSettings)
    assert default.session_settings.limit is None
    limited = ComalSession(ledger, session_settings=SessionSettings(limit=3))
    from_dict = ComalSession(ledger, session_settings={"limit": 3})
    assert from_dict.session_settings == SessionSettings(limit=3)
    turns = [{"role": "user", "content": f"Turn {i}"} for i in range(10)]
    _run(limited.add_items(turns))
    assert _run(limited.get_items()) == turns[-3:]
    assert _run(limited.get_items(limit=2)) == turns[-2:]  # an explicit limit wins
    with pytest.raises(TypeError, match="Unknown session settings"):
        ComalSession(ledger, session_settings={"limitt": 1})
    # RunConfig's session_settings override the session's for one run.
    model = ScriptedModel([_said("Got it")])
    config = RunConfig(session_settings=SessionSettings(limit=2))
    _run(Runner.run(_agent(model), "New", session=limited, run_config=config))
    assert model.calls[-1].input == [*turns[-2:], {"role": "user", "content": "New"}]


def test_pop_returns_the_newest_item_and_the_ledger_keeps_it(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    session = ComalSession(ledger)
    assert _run(session.pop_item()) is None
    _run(session.add_items(copy.deepcopy(ITEMS)))
    first = session.comal.scope
    before = [e.digest for e in session.comal.entries()]
    assert _run(session.pop_item()) == ITEMS[-1]
    assert _run(session.pop_item()) == ITEMS[-2]
    assert _run(session.get_items()) == ITEMS[:-2]
    assert _run(session.get_items(limit=1)) == ITEMS[-3:-2]
    # Nothing left the ledger: the entries are untouched, each pop is an event holding the
    # exact bytes it removed.
    assert [e.digest for e in ledger.entries(first)] == before
    pops = [r.body["item"] for r in ledger.records(first, "event", kinds=(POP_EVENT,))]
    assert pops == _texts(ITEMS[-1:]) + _texts(ITEMS[-2:-1])
    # What is added next continues in a branch that holds the items left, the old session its
    # parent; the same id opened again reads the branch.
    _run(session.add_items([{"role": "user", "content": "after"}]))
    branch = session.comal.scope
    assert branch != first
    info = ledger.session(branch)
    assert info is not None and info.parent == first.session
    assert [r.body["session"] for r in ledger.records(first, "event", kinds=(BRANCH_EVENT,))] == [
        branch.session
    ]
    expected = [*ITEMS[:-2], {"role": "user", "content": "after"}]
    assert _run(ComalSession(ledger, session=session.session_id).get_items()) == expected
    assert session.session_id == first.session  # the SDK's id does not change


def test_a_popped_item_is_no_longer_sent(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    # 8,000 tokens and three ~2,500-token outputs: the filter sends the engine's assembly.
    session = ComalSession(ledger, window=8_000, settings={"keep_recent_results": 1})
    for n in range(1, 4):
        _run(
            session.add_items(
                [
                    {"role": "user", "content": f"run job {n}"},
                    {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": f"c{n}", "output": output(n)},
                ]
            )
        )
    _run(session.add_items([{"role": "user", "content": "POPPED-REQUEST"}]))
    assert _run(session.pop_item()) == {"role": "user", "content": "POPPED-REQUEST"}
    model = ScriptedModel([_said("ok")])
    _run(Runner.run(_agent(model), "what ran?", session=session, run_config=session.run_config()))
    sent = json.dumps(model.calls[-1].input)
    assert "POPPED-REQUEST" not in sent and "what ran?" in sent
    assert "[stored output: entry" in sent  # the assembly, not the Runner's own input
    stage = [r.meta["stage"] for r in ledger.requests(session.comal.scope)]
    assert stage and stage[-1] != "verbatim"


def test_a_cleared_session_starts_empty(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    session = ComalSession(ledger, window=8_000, settings={"keep_recent_results": 1})
    old = [{"role": "user", "content": "OLD-REQUEST"}, {"role": "assistant", "content": "OLD"}]
    _run(session.add_items(old))
    first = session.comal.scope
    _run(session.clear_session())
    assert _run(session.get_items()) == []
    assert _run(ComalSession(ledger, session=session.session_id).get_items()) == []
    for config in (session.run_config(), None):
        model = ScriptedModel([_said("fresh")])
        _run(Runner.run(_agent(model), "new start", session=session, run_config=config))
        assert "OLD" not in json.dumps(model.calls[-1].input)
    assert [i.get("content") for i in _run(session.get_items()) if i.get("role") == "user"] == [
        "new start", "new start",
    ]  # fmt: skip
    # The old session keeps every byte, and says it was cleared.
    assert [e.message.text for e in ledger.entries(first)] == ["OLD-REQUEST", "OLD"]
    cleared = ledger.records(first, "event", kinds=(CLEAR_EVENT,))
    assert [r.body["items"] for r in cleared] == [2]


def test_one_list_of_items_given_to_two_sessions(ledger: LedgerBackend) -> None:
    # covers: INT-1
    shared = copy.deepcopy(ITEMS)
    one, two = ComalSession(ledger), ComalSession(ledger)
    _run(one.add_items(shared))
    _run(two.add_items(shared))
    assert shared == ITEMS
    assert _texts(_run(one.get_items())) == _texts(_run(two.get_items())) == _texts(ITEMS)
    model = ScriptedModel([_said("ok")])
    _run(Runner.run(_agent(model), "next", session=two, run_config=two.run_config()))
    assert model.calls[-1].input == [*ITEMS, {"role": "user", "content": "next"}]
    assert len(_run(one.get_items())) == len(ITEMS)


def test_sessions_side_by_side_on_one_ledger(any_ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-4
    sessions = [ComalSession(any_ledger) for _ in range(4)]
    failures: list[BaseException] = []

    def talk(k: int) -> None:
        try:
            for turn in range(3):
                model = ScriptedModel([_said(f"reply {k}.{turn}")])
                session = sessions[k]
                config = session.run_config()
                prompt = f"ask {k}.{turn}"
                asyncio.run(Runner.run(_agent(model), prompt, session=session, run_config=config))
        except BaseException as exc:  # reported below, with the session it happened in
            failures.append(exc)

    threads = [threading.Thread(target=talk, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for k, session in enumerate(sessions):
        items = _run(session.get_items())
        asked = [i["content"] for i in items if i.get("role") == "user"]
        assert asked == [f"ask {k}.{turn}" for turn in range(3)]
        assert [e.role for e in session.comal.entries()] == ["user", "assistant"] * 3


def test_one_session_written_from_several_threads_keeps_every_item(ledger: LedgerBackend) -> None:
    # covers: INT-1
    session = ComalSession(ledger)
    items = [{"role": "user", "content": f"Message {i}"} for i in range(10)]
    threads = [
        threading.Thread(target=lambda i=i: asyncio.run(session.add_items([items[i]])))
        for i in range(10)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    back = _run(session.get_items())
    assert sorted(i["content"] for i in back) == sorted(i["content"] for i in items)
    assert len(session.comal.entries()) == 10


@pytest.mark.parametrize("change", ["add", "pop", "clear"])
def test_a_cancelled_change_returns_once_its_outcome_is_known(
    ledger: LedgerBackend, change: str
) -> None:
    # covers: INT-1
    session = ComalSession(ledger)
    item = {"role": "user", "content": "once"}
    if change != "add":
        _run(session.add_items([item]))

    async def scenario() -> None:
        with session.comal.lock:  # the write's worker waits here until released below
            if change == "add":
                task = asyncio.create_task(session.add_items([item]))
            elif change == "pop":
                task = asyncio.create_task(session.pop_item())
            else:
                task = asyncio.create_task(session.clear_session())
            for _ in range(3):
                await asyncio.sleep(0)
            task.cancel()
            for _ in range(3):
                await asyncio.sleep(0)
            # The caller does not hear of the cancellation while the write may still happen.
            assert not task.done()
        with pytest.raises(asyncio.CancelledError):
            await task

    _run(scenario())
    assert _run(session.get_items()) == ([item] if change == "add" else [])


def test_a_session_written_before_items_were_kept_gives_back_its_entries(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1
    from comal.messages import Message, ToolCall

    scope = ledger.create_session("default", "agent", source="integration:openai-agents")
    ledger.append(scope, [Message.user("go")])
    ledger.append(
        scope, [Message.assistant("", ToolCall("c1", "f", "{}")), Message.tool("c1", "ok")]
    )
    session = ComalSession(ledger, session=scope.session)
    back = _run(session.get_items())
    assert [i.get("type") for i in back] == ["message", "function_call", "function_call_output"]
    assert back[2]["output"] == "ok"
    # Read once: the items are kept from then on, and new ones follow them.
    _run(session.add_items([{"role": "user", "content": "next"}]))
    assert _run(ComalSession(ledger, session=scope.session).get_items())[3] == {
        "role": "user", "content": "next",
    }  # fmt: skip
