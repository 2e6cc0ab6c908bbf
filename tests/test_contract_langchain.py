"""LangChain v1's invariants, held by ComalMiddleware in a real ``create_agent`` loop: the model
gets the state's own messages (ids and all) while they fit, an AIMessage with tool calls is
never sent without its ToolMessages, a RemoveMessage or an edit is what the model sees next,
one input given to two agents is recorded by both, and agents side by side on one ledger stay
apart. The model is LangChain's own fake chat model."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="the langchain extra is not installed")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import Field

from _integration_support import output
from comal.integrations import BRANCH_EVENT, ComalMiddleware
from comal.ledger import LedgerBackend


class Fake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools and keeps every input it was given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _fake(*replies: AIMessage) -> Fake:
    return Fake(messages=iter(replies))


def _answers(n: int) -> Iterator[AIMessage]:
    for k in range(n):
        yield AIMessage(f"answer {k}")


@tool
def run_job(n: int) -> str:
    """Run job n and return its log."""
    return output(n)


def _call(call_id: str, n: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "run_job", "args": {"n": n}, "id": call_id}])


def _agent(model: Fake, middleware: ComalMiddleware | None, saver: Any = None) -> Any:
    return create_agent(
        model, tools=[run_job], middleware=[middleware] if middleware else [],
        system_prompt="You run jobs.", checkpointer=saver,
    )  # fmt: skip


def _contents(messages: list[BaseMessage]) -> list[Any]:
    return [m.content for m in messages if m.type != "system"]


EARLIER: list[BaseMessage] = [
    HumanMessage("run job 1", id="h1", additional_kwargs={"source": "cli"}),
    AIMessage(
        "", id="a1", tool_calls=[{"name": "run_job", "args": {"n": 1}, "id": "c1"}],
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
    ),
    ToolMessage("job 1 — résumé ok", tool_call_id="c1", id="t1", artifact={"rows": 3}),
    AIMessage("done", id="a2", additional_kwargs={"refusal": None}),
]  # fmt: skip


def test_the_model_gets_the_states_own_messages_while_they_fit(ledger: LedgerBackend) -> None:
    # covers: INT-1
    plain = _fake(AIMessage("ok"))
    _agent(plain, None).invoke({"messages": [*EARLIER, HumanMessage("and now?", id="h2")]})
    model = _fake(AIMessage("ok"))
    middleware = ComalMiddleware(ledger)
    state = _agent(model, middleware).invoke(
        {"messages": [*EARLIER, HumanMessage("and now?", id="h2")]}
    )
    # Ids, additional_kwargs, response_metadata, artifacts: what LangChain itself would send.
    assert model.seen[0] == plain.seen[0]
    assert [m.id for m in model.seen[0][1:]] == ["h1", "a1", "t1", "a2", "h2"]
    # The state keeps the framework's ids: comal sets none.
    assert [m.id for m in state["messages"]][:5] == ["h1", "a1", "t1", "a2", "h2"]
    assert not any(str(m.id).startswith("comal-") for m in state["messages"])
    assert len(middleware.comal.entries()) == 6


def test_past_the_window_calls_keep_their_results_and_the_state_keeps_its_ids(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1, EVI-1
    middleware = ComalMiddleware(ledger, window=8_000, settings={"keep_recent_results": 1})
    model = _fake(*[_call(f"c{n}", n) for n in range(1, 5)], AIMessage("four ran"))
    state = _agent(model, middleware).invoke({"messages": [HumanMessage("run four jobs")]})
    ids = {m.id: m for m in state["messages"]}
    assert any("[stored output: entry" in str(m.content) for m in model.seen[-1])
    for sent in model.seen:
        waiting: set[str] = set()
        for message in sent:
            if isinstance(message, ToolMessage):
                assert message.tool_call_id in waiting, "a ToolMessage without its call"
                waiting.discard(message.tool_call_id)
                continue
            assert not waiting, f"calls sent without their ToolMessages: {waiting}"
            if isinstance(message, AIMessage):
                waiting = {c["id"] for c in message.tool_calls if c["id"]}
        # What the engine sends unchanged is the state's own message; stand-ins are new.
        asked = next(m for m in sent if isinstance(m, HumanMessage))
        assert asked.id in ids and ids[asked.id] == asked
        for message in sent:
            if message.id is not None and message.type != "system":
                assert ids[message.id] == message
    assert [m.content for m in state["messages"] if isinstance(m, ToolMessage)] == [
        output(n) for n in range(1, 5)
    ]


def test_a_removed_message_is_not_sent_again(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    middleware = ComalMiddleware(ledger)
    model = _fake(*_answers(5))
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t1"}}
    agent = _agent(model, middleware, saver)
    agent.invoke({"messages": [HumanMessage("keep this", id="k")]}, config)
    agent.invoke({"messages": [HumanMessage("DROPPED question", id="d")]}, config)
    first = middleware.comal.scope
    dropped_reply = agent.get_state(config).values["messages"][-1]
    removed = [RemoveMessage(id="d"), RemoveMessage(id=dropped_reply.id)]
    agent.update_state(config, {"messages": removed})
    agent.invoke({"messages": [HumanMessage("third", id="t")]}, config)
    assert _contents(model.seen[-1]) == ["keep this", "answer 0", "third"]
    # The session went on in a branch; the old one keeps every byte and names it.
    branch = middleware.comal.scope
    info = ledger.session(branch)
    assert info is not None and info.parent == first.session
    assert "DROPPED question" in [e.message.text for e in ledger.entries(first)]
    events = ledger.records(first, "event", kinds=(BRANCH_EVENT,))
    assert [r.body["session"] for r in events] == [branch.session]

    # An edit through a message's id is what the model sees next.
    agent.update_state(config, {"messages": [HumanMessage("EDITED", id="k")]})
    agent.invoke({"messages": [HumanMessage("fourth", id="f")]}, config)
    assert _contents(model.seen[-1])[0] == "EDITED"

    # REMOVE_ALL_MESSAGES: a cleared state starts empty.
    agent.update_state(config, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)]})
    agent.invoke({"messages": [HumanMessage("fresh", id="n")]}, config)
    assert _contents(model.seen[-1]) == ["fresh"]
    reopened = ComalMiddleware(ledger, session=middleware.session_id)
    assert reopened.comal.scope == middleware.comal.scope
    assert [e.message.text for e in reopened.comal.entries()] == ["fresh", "answer 4"]


def test_one_input_given_to_two_agents_is_recorded_by_both(ledger: LedgerBackend) -> None:
    # covers: INT-1
    one, two = ComalMiddleware(ledger), ComalMiddleware(ledger)
    for middleware in (one, two):
        model = _fake(AIMessage("ok"))
        _agent(model, middleware).invoke({"messages": [*EARLIER, HumanMessage("next", id="n")]})
        assert _contents(model.seen[0]) == [m.content for m in EARLIER] + ["next"]
    assert [e.role for e in one.comal.entries()] == [e.role for e in two.comal.entries()]
    assert len(two.comal.entries()) == 6
    assert [m.id for m in EARLIER] == ["h1", "a1", "t1", "a2"]  # the input is not changed


def test_agents_side_by_side_on_one_ledger(any_ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-4
    middlewares = [ComalMiddleware(any_ledger) for _ in range(4)]
    failures: list[BaseException] = []

    def talk(k: int) -> None:
        try:
            saver = InMemorySaver()
            config = {"configurable": {"thread_id": f"t{k}"}}
            model = _fake(*[_call(f"c{k}.{t}", k) for t in range(2)], AIMessage("done"))
            agent = _agent(model, middlewares[k], saver)
            agent.invoke({"messages": [HumanMessage(f"ask {k}")]}, config)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=talk, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for k, middleware in enumerate(middlewares):
        entries = middleware.comal.entries()
        assert [e.message.text for e in entries if e.role == "user"] == [f"ask {k}"]
        results = [e.message.tool_result for e in entries if e.message.tool_result is not None]
        assert [r.call_id for r in results] == [f"c{k}.0", f"c{k}.1"]
        assert middleware.comal.scope.session == middleware.session_id  # no branch
