"""OpenAI Agents SDK: ComalSession end to end through the SDK's Runner, its OpenAI client
pointed at comal.testing.FakeServer (the Responses API), past a small window."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from _integration_support import (
    assert_outputs_kept,
    assert_pairs_whole,
    assert_requests_fit,
    output,
    page_text,
    references,
)
from comal.integrations import ComalSession
from comal.ledger import LedgerBackend
from comal.messages.wire import from_openai_responses
from comal.testing import FakeServer

WINDOW = 8_000
SETTINGS = {"keep_recent_results": 1}
JOBS = 5


@function_tool
def run_job(n: int) -> str:
    """Run job n and return its log."""
    return output(n)


def _use(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": args}
    return {"content": [block], "stop_reason": "tool_use"}


def _say(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _run(server: FakeServer, session: ComalSession, prompt: str) -> Any:
    async def run() -> Any:
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="test-key", max_retries=0)
        agent: Agent[Any] = Agent(
            name="jobs",
            instructions="You run jobs.",
            tools=[run_job, *session.tools],
            model=OpenAIResponsesModel("gpt-4.1", client),
        )
        async with client:  # its connections closed on this loop, before it closes
            config = session.run_config()
            return await Runner.run(agent, prompt, session=session, run_config=config)

    return asyncio.run(run())


def _sent(server: FakeServer, index: int) -> str:
    return str(server.requests[index].body["input"])


def test_runner_reads_comal_assembly_keeps_outputs_recalls_and_resumes(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1, LED-1, EVI-1, EVI-2
    set_tracing_disabled(True)
    session = ComalSession(ledger, window=WINDOW, settings=SETTINGS)
    script = [_use("run_job", {"n": n}, f"c{n}") for n in range(1, JOBS + 1)]
    with FakeServer([*script, _say("five jobs ran")]) as server:
        result = _run(server, session, "run jobs 1 to 5")
        server.assert_complete()
        requests = [r.body for r in server.requests]
    assert result.final_output == "five jobs ran"
    comal = session.comal

    # What went upstream was comal's assembly: references stood in for old outputs, every
    # pair whole, every request within the window.
    metas = assert_requests_fit(comal)
    assert len(metas) == len(requests) == JOBS + 1
    assert any(m["referenced"] for m in metas)
    for body in requests:
        assert body["instructions"] == "You run jobs."
        assert_pairs_whole(from_openai_responses(body["input"]))
    found = references(str(requests[-1]["input"]))
    assert found

    # Every original output is in the ledger byte for byte.
    outputs = {f"c{n}": output(n) for n in range(1, JOBS + 1)}
    assert_outputs_kept(comal, outputs)

    # A second run in a new ComalSession resumes the session from the ledger; the model reads
    # a referenced output back through EvidenceRead, judged by the house.
    entry, digest = found[0]
    again = ComalSession(ledger, window=WINDOW, settings=SETTINGS, session=comal.session_id)
    recall = _use("EvidenceRead", {"entry": entry, "expected_digest": digest}, "r1")
    with FakeServer([recall, _say("job 1 printed its log")]) as server:
        second = _run(server, again, "what did job 1 print?")
        server.assert_complete()
        first_sent = _sent(server, 0)
    assert second.final_output == "job 1 printed its log"
    assert "[stored output: entry" in first_sent and "what did job 1 print?" in first_sent
    # What the tool returned to the Runner (the next request may bound it to fit the window).
    page = next(i.output for i in second.new_items if i.type == "tool_call_output_item")
    stored = ledger.entry(comal.scope, entry)
    assert stored is not None and stored.message.tool_result is not None
    assert page_text(page) == stored.message.tool_result.text
    assert [r.kind for r in ledger.records(comal.scope, "receipt")] == ["EvidenceRead"]
    assert_outputs_kept(again.comal, {**outputs, "r1": page})
    assert_requests_fit(again.comal)


def test_pipeline_session_search_runs_through_the_runner(ledger: LedgerBackend) -> None:
    # covers: INT-1
    set_tracing_disabled(True)
    session = ComalSession(ledger, window=32_000, engine="pipeline")
    assert {t.name for t in session.tools} >= {"EvidenceRead", "session_search", "memory_search"}
    word = output(3).split("\n")[1].split()[5]
    script = [
        _use("run_job", {"n": 3}, "c3"),
        _use("session_search", {"query": word}, "q1"),
        _say("found it"),
    ]
    with FakeServer(script) as server:
        result = _run(server, session, "run job 3, then find its log")
        server.assert_complete()
    assert result.final_output == "found it"
    outputs = [i for i in result.new_items if i.type == "tool_call_output_item"]
    found = next(str(i.output) for i in outputs if i.raw_item["call_id"] == "q1")
    assert word in found and "entry" in found
    assert [r.kind for r in ledger.records(session.comal.scope, "receipt")] == ["session_search"]
