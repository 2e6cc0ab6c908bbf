"""LangChain v1: ComalMiddleware in a real ``create_agent`` loop, with LangChain's own fake chat
model calling real tools past a small window."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="the langchain extra is not installed")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from _integration_support import (
    assert_outputs_kept,
    assert_pairs_whole,
    assert_requests_fit,
    output,
    page_text,
    references,
)
from comal.integrations import ComalMiddleware, IntegrationInput
from comal.integrations._langchain import to_comal
from comal.ledger import LedgerBackend
from comal.tokens import count_messages

WINDOW = 8_000
SETTINGS = {"keep_recent_results": 1}


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools and keeps every input it was given."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def run_job(n: int) -> str:
    """Run job n and return its log."""
    return output(n)


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def _first_run(model: ToolCallingFake, found: list[tuple[int, str]]) -> Iterator[AIMessage]:
    for n in range(1, 5):
        yield _call("run_job", {"n": n}, f"c{n}")
    # The model reads a reference it was sent and asks for the exact bytes.
    seen = "\n".join(str(m.content) for m in model.seen[-1])
    found.extend(references(seen))
    entry, digest = found[0]
    yield _call("EvidenceRead", {"entry": entry, "expected_digest": digest}, "r1")
    yield AIMessage("all four jobs ran")


def _model(script: Iterator[AIMessage] | None = None) -> ToolCallingFake:
    model = ToolCallingFake(messages=iter(()))
    if script is not None:
        model.messages = script
    return model


def _agent(model: ToolCallingFake, middleware: ComalMiddleware, saver: InMemorySaver) -> Any:
    return create_agent(
        model,
        tools=[run_job],
        middleware=[middleware],
        system_prompt="You run jobs.",
        checkpointer=saver,
    )


def test_agent_sends_comal_assembly_keeps_outputs_recalls_and_resumes(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1, LED-1, EVI-1, EVI-2
    middleware = ComalMiddleware(ledger, window=WINDOW, settings=SETTINGS)
    model = _model()
    found: list[tuple[int, str]] = []
    model.messages = _first_run(model, found)
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t1"}}
    state = _agent(model, middleware, saver).invoke(
        {"messages": [{"role": "user", "content": "run jobs 1 to 4"}]}, config
    )
    comal = middleware.comal

    # The model was sent comal's assembly: references stand in for old outputs, pairs whole,
    # and every request fitted the window.
    assert found, "no reference reached the model"
    metas = assert_requests_fit(comal)
    assert any(m["referenced"] for m in metas)
    assert len(model.seen) == len(metas) == 6
    counter = ledger.counter
    for sent, meta in zip(model.seen, metas, strict=True):
        history = to_comal([m for m in sent if m.type != "system"])
        assert_pairs_whole(history)
        assert count_messages(counter, history) <= int(meta["input_limit"]) - int(
            meta["fixed_tokens"]
        )
    assert any(len(sent) < len(state["messages"]) for sent in model.seen)

    # Every original output is in the ledger byte for byte (the state kept them too).
    outputs = {f"c{n}": output(n) for n in range(1, 5)}
    assert_outputs_kept(comal, outputs)
    tool_messages = {m.tool_call_id: m.content for m in state["messages"] if m.type == "tool"}
    assert {k: tool_messages[k] for k in outputs} == outputs

    # The recall call went through the house and returned the referenced bytes exactly.
    entry_id, digest = found[0]
    referenced = ledger.entry(comal.scope, entry_id)
    assert referenced is not None and referenced.message.tool_result is not None
    original = referenced.message.tool_result.text
    page = tool_messages["r1"]
    assert isinstance(page, str) and page_text(page) == original and digest in page
    receipts = ledger.records(comal.scope, "receipt")
    assert [r.kind for r in receipts] == ["EvidenceRead"]
    assert_outputs_kept(comal, {"r1": page})

    # A second run: a new middleware resumes the session from the ledger; the agent's
    # checkpointer hands the first run's messages back, and nothing is recorded twice.
    before = len(comal.entries())
    again = ComalMiddleware(ledger, window=WINDOW, settings=SETTINGS, session=comal.session_id)
    second = _model(iter([_call("run_job", {"n": 5}, "c5"), AIMessage("five ran")]))
    _agent(second, again, saver).invoke(
        {"messages": [{"role": "user", "content": "now job 5"}]}, config
    )
    entries = again.comal.entries()
    assert len(entries) == before + 4  # the user message, the call, its result, the answer
    assert_outputs_kept(again.comal, {**outputs, "c5": output(5)})
    first_sent = "\n".join(str(m.content) for m in second.seen[0])
    assert "[stored output: entry" in first_sent or "[checkpoint" in first_sent
    assert "now job 5" in first_sent
    assert_requests_fit(again.comal)


def test_fresh_agent_resumes_without_a_checkpointer(ledger: LedgerBackend) -> None:
    # covers: INT-1
    first = ComalMiddleware(ledger, window=32_000)  # room for the output whole
    model = _model(iter([_call("run_job", {"n": 1}, "c1"), AIMessage("one ran")]))
    create_agent(model, tools=[run_job], middleware=[first]).invoke(
        {"messages": [{"role": "user", "content": "job 1"}]}
    )
    again = ComalMiddleware(ledger, window=32_000, session=first.session_id)
    second = _model(iter([AIMessage("I ran job 1 before")]))
    create_agent(second, tools=[run_job], middleware=[again]).invoke(
        {"messages": [{"role": "user", "content": "what ran?"}]}
    )
    # The model of the second agent was sent the first run from the ledger.
    sent = second.seen[0]
    assert [m.type for m in sent] == ["human", "ai", "tool", "ai", "human"]
    assert isinstance(sent[2], ToolMessage) and sent[2].content == output(1)
    assert len(again.comal.entries()) == 6


def test_bad_options_are_coded_errors(ledger: LedgerBackend) -> None:
    with pytest.raises(IntegrationInput) as caught:
        ComalMiddleware(ledger, window=10)
    assert caught.value.code == "INTEGRATION_INPUT"


def test_async_agent_is_recorded_the_same(ledger: LedgerBackend) -> None:
    # covers: INT-1
    middleware = ComalMiddleware(ledger, window=32_000)
    model = _model(iter([_call("run_job", {"n": 2}, "c2"), AIMessage("two ran")]))
    agent = create_agent(model, tools=[run_job], middleware=[middleware])
    asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "job 2"}]}))
    roles = [e.role for e in middleware.comal.entries()]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert_outputs_kept(middleware.comal, {"c2": output(2)})
    assert len(assert_requests_fit(middleware.comal)) == 2
