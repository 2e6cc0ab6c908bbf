"""pydantic-ai: ComalHistory as a capability and as a plain history processor with its
toolset, driven by pydantic-ai's own FunctionModel and TestModel past a small window, under the
dag engine (summaries, ``ctx_*`` recall)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from _integration_support import (
    assert_outputs_kept,
    assert_pairs_whole,
    assert_requests_fit,
    output,
    page_text,
)
from comal.integrations import ComalHistory
from comal.integrations._pydantic_ai import to_comal
from comal.ledger import LedgerBackend

WINDOW = 12_000
# Small enough that six outputs of ~3,500 tokens are summarized by the dag engine.
SETTINGS = {"fresh_tail_turns": 2, "leaf_min_chunk_tokens": 1_000, "leaf_chunk_tokens": 4_000}
JOBS = 6


def _text(messages: list[ModelMessage]) -> str:
    return "\n".join(str(getattr(p, "content", "")) for m in messages for p in m.parts)


def _returned(messages: list[ModelMessage], call_id: str) -> str:
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolReturnPart) and p.tool_call_id == call_id:
                return str(p.content)
    raise AssertionError(f"no return for {call_id}")


class Script:
    """The model of the first run: six jobs, then recall through ctx_search, ctx_expand and
    EvidenceRead, each argument read from what it was sent."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.summary: int | None = None
        self.entry: int | None = None

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        k = len(self.seen)
        if k <= JOBS:
            return _call("run_job", {"n": k}, f"c{k}")
        if k == JOBS + 1:
            found = re.search(r"ctx_expand\(summary=(\d+)\)", _text(messages))
            assert found, "no summary reached the model"
            self.summary = int(found.group(1))
            return _call("ctx_expand", {"summary": self.summary}, "x1")
        if k == JOBS + 2:
            word = output(1).split("\n")[1].split()[3]
            return _call("ctx_search", {"query": word, "kind": "messages"}, "s1")
        if k == JOBS + 3:
            # The job's own output (the earliest hit), not the ctx_expand page that quotes it
            # among its sources.
            said = _returned(messages, "s1")
            hits = re.findall(r"entry (\d+) \(seq (\d+), tool\)", said)
            assert hits, said
            self.entry = int(min(hits, key=lambda h: int(h[1]))[0])
            return _call("EvidenceRead", {"entry": self.entry}, "r1")
        return ModelResponse(parts=[TextPart("six jobs ran")])


def _call(name: str, args: dict[str, Any], call_id: str) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=call_id)])


def _run(
    agent: Agent[None, str], prompt: str, history: list[ModelMessage] | None = None
) -> AgentRunResult[str]:
    # asyncio.run closes its loop; run_sync leaves the thread's loop open for the collector to
    # find (a ResourceWarning, an error under filterwarnings=error) in whichever test runs then.
    return asyncio.run(agent.run(prompt, message_history=history))


def _agent(model: Any, **options: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, instructions="You run jobs.", **options)

    @agent.tool_plain
    def run_job(n: int) -> str:
        """Run job n and return its log."""
        return output(n)

    return agent


def test_agent_sends_comal_assembly_keeps_outputs_recalls_and_resumes(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1, LED-1, EVI-1, DAG-7
    history = ComalHistory(ledger, window=WINDOW, engine="dag", settings=SETTINGS)
    script = Script()
    result = _run(
        _agent(FunctionModel(script), capabilities=[history.capability()]), "run six jobs"
    )
    comal = history.comal
    assert result.output == "six jobs ran"

    # The model was sent comal's assembly: a summary stands in for old steps, pairs whole,
    # every request fitted; the run's own history kept the framework's messages.
    assert script.summary is not None and ledger.summaries(comal.scope)
    metas = assert_requests_fit(comal)
    assert len(metas) == len(script.seen) == JOBS + 4
    assert any(m["stage"] == "summaries" for m in metas)
    for sent in script.seen:
        assert_pairs_whole(to_comal(sent))
    assert len(script.seen[-1]) < len(result.all_messages())
    outputs = {f"c{n}": output(n) for n in range(1, JOBS + 1)}
    assert {k: _returned(result.all_messages(), k) for k in outputs} == outputs

    # Every output is in the ledger byte for byte; the recall calls went through the house.
    assert_outputs_kept(comal, outputs)
    receipts = [r.kind for r in ledger.records(comal.scope, "receipt")]
    assert receipts == ["ctx_expand", "ctx_search", "EvidenceRead"]
    expanded = _returned(result.all_messages(), "x1")
    assert expanded.startswith(f"[ctx_expand summary={script.summary}:")
    assert script.entry is not None
    found = ledger.entry(comal.scope, script.entry)
    assert found is not None and found.message.tool_result is not None
    assert found.message.tool_result.text == output(1)
    assert page_text(_returned(result.all_messages(), "r1")) == output(1)

    # A second run, as a plain history processor and toolset, resumes from the ledger: given
    # the first run's messages it records none of them again.
    before = len(comal.entries())
    again = ComalHistory(
        ledger, window=WINDOW, engine="dag", settings=SETTINGS, session=comal.session_id
    )
    seen: list[list[ModelMessage]] = []

    def resume(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        if len(seen) == 1:
            return _call("run_job", {"n": 7}, "c7")
        return ModelResponse(parts=[TextPart("seven ran")])

    options = {"capabilities": [ProcessHistory(again)], "toolsets": [again.toolset]}
    second = _run(_agent(FunctionModel(resume), **options), "one more job", result.all_messages())
    assert second.output == "seven ran"
    entries = again.comal.entries()
    # The prompt, the call and its result; the last reply is recorded when the next run starts
    # with this history (a history processor is not called after a run's last reply).
    assert len(entries) == before + 3
    assert_outputs_kept(again.comal, {**outputs, "c7": output(7)})
    sent = _text(seen[0])
    # The first run's work, stood in for by the dag's stand-ins, then the new prompt.
    assert sent.startswith("[comal") and sent.endswith("six jobs ran\none more job")
    assert_requests_fit(again.comal)


def test_a_plain_processor_records_the_previous_reply_when_the_next_run_starts(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1
    history = ComalHistory(ledger, window=32_000)
    agent = _agent(TestModel(call_tools=[]), capabilities=[ProcessHistory(history)])
    first = _run(agent, "hello")
    assert len(history.comal.entries()) == 1
    _run(agent, "again", first.all_messages())
    roles = [e.role for e in history.comal.entries()]
    assert roles == ["user", "assistant", "user"]


def test_system_prompt_parts_reach_the_model(ledger: LedgerBackend) -> None:
    history = ComalHistory(ledger, window=32_000)
    seen: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    agent: Agent[None, str] = Agent(
        FunctionModel(answer), system_prompt="Be brief.", capabilities=[history.capability()]
    )
    _run(agent, "hi")
    first = seen[0][0]
    assert isinstance(first, ModelRequest)
    assert [type(p).__name__ for p in first.parts] == ["SystemPromptPart", "UserPromptPart"]
