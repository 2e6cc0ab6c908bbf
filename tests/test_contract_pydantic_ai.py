"""pydantic-ai's history contract, held by ComalHistory: the history a run is given reaches its
model whole (as it is, while it fits), the caller's messages are never changed, a history
handed to another session is recorded there too, a shorter history is honoured, and sessions
side by side on one ledger stay apart. The models are pydantic-ai's own FunctionModel."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.messages import (
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from _integration_support import assert_pairs_whole, output
from comal.integrations import BRANCH_EVENT, ComalHistory
from comal.integrations._pydantic_ai import to_comal
from comal.ledger import LedgerBackend

Seen = list[list[ModelMessage]]


def _model(seen: Seen, reply: Callable[[int], ModelResponse] | None = None) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(copy.deepcopy(messages))
        if reply is not None:
            return reply(len(seen))
        return ModelResponse(parts=[TextPart(f"answer {len(seen)}")])

    return FunctionModel(answer)


def _run(
    agent: Agent[None, str], prompt: str, history: list[ModelMessage] | None = None
) -> AgentRunResult[str]:
    return asyncio.run(agent.run(prompt, message_history=history))


def _with(history: ComalHistory, mode: str) -> dict[str, Any]:
    if mode == "capability":
        capability: AbstractCapability[Any] = history.capability()
        return {"capabilities": [capability]}
    return {"capabilities": [ProcessHistory(history)], "toolsets": [history.toolset]}


def _texts(messages: list[ModelMessage]) -> list[str]:
    return [str(getattr(p, "content", "")) for m in messages for p in m.parts]


# An earlier conversation as pydantic-ai keeps it: thinking, an image URL, a tool call with
# parsed arguments and a return with metadata, ids and timestamps.
EARLIER: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart(["Look at this", ImageUrl("https://example.com/a.png")])]),
    ModelResponse(
        parts=[
            ThinkingPart("the user wants a look", signature="sig-1"),
            ToolCallPart("look", {"at": "a.png"}, tool_call_id="call_1"),
        ],
        provider_response_id="resp_1",
    ),
    ModelRequest(
        parts=[ToolReturnPart("look", "a cat — résumé", tool_call_id="call_1", metadata={"k": 1})]
    ),
    ModelResponse(parts=[TextPart("It is a cat.")], provider_response_id="resp_2"),
]


@pytest.mark.parametrize("mode", ["capability", "processor"])
def test_a_history_given_to_a_fresh_session_reaches_its_model_whole(
    ledger: LedgerBackend, mode: str
) -> None:
    # covers: INT-1
    first = ComalHistory(ledger)
    result = _run(Agent(_model([]), **_with(first, "capability")), "First question")
    earlier = result.all_messages()
    kept = copy.deepcopy(earlier)

    # The same messages handed to a second, fresh session: its model gets all of them, as a
    # plain agent's model would.
    plain: Seen = []
    _run(Agent(_model(plain)), "New question", earlier)
    second = ComalHistory(ledger)
    seen: Seen = []
    _run(Agent(_model(seen), **_with(second, mode)), "New question", earlier)
    assert _texts(seen[0]) == ["First question", "answer 1", "New question"]
    assert seen[0][:-1] == plain[0][:-1] == kept  # the earlier messages as they are
    # The caller's messages are as they were: no mark, no field changed.
    assert earlier == kept
    assert all(m.metadata is None for m in earlier)
    # Both sessions hold the earlier conversation; the first one is not touched by the second.
    assert [e.role for e in second.comal.entries()][:3] == ["user", "assistant", "user"]
    assert [e.role for e in first.comal.entries()] == ["user", "assistant"]


@pytest.mark.parametrize("mode", ["capability", "processor"])
def test_the_model_gets_the_runs_own_messages_while_they_fit(
    ledger: LedgerBackend, mode: str
) -> None:
    # covers: INT-1
    plain: Seen = []
    _run(Agent(_model(plain)), "And now?", copy.deepcopy(EARLIER))
    seen: Seen = []
    history = ComalHistory(ledger)
    given = copy.deepcopy(EARLIER)
    _run(Agent(_model(seen), **_with(history, mode)), "And now?", given)
    # Thinking, the image, the metadata, ids and timestamps: what pydantic-ai would send.
    assert seen[0][:-1] == plain[0][:-1] == EARLIER
    assert _texts(seen[0][-1:]) == _texts(plain[0][-1:]) == ["And now?"]
    assert given == EARLIER
    # The ledger holds what comal's form carries of them.
    results = [e.message.tool_result for e in history.comal.entries()]
    assert [r.text for r in results if r is not None] == ["a cat — résumé"]


def _jobs(n: int) -> Callable[[int], ModelResponse]:
    def reply(k: int) -> ModelResponse:
        if k <= n:
            return ModelResponse(parts=[ToolCallPart("run_job", {"n": k}, tool_call_id=f"c{k}")])
        return ModelResponse(parts=[TextPart("done")])

    return reply


def _job_agent(model: FunctionModel, **options: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, **options)

    @agent.tool_plain
    def run_job(n: int) -> str:
        """Run job n."""
        return output(n)

    return agent


def test_past_the_window_pairs_stay_whole_and_the_run_keeps_its_history(
    ledger: LedgerBackend,
) -> None:
    # covers: INT-1, EVI-1
    history = ComalHistory(ledger, window=8_000, settings={"keep_recent_results": 1})
    seen: Seen = []
    agent = _job_agent(_model(seen, _jobs(4)), **_with(history, "capability"))
    result = _run(agent, "run four jobs")
    assert result.output == "done"
    for sent in seen:
        assert_pairs_whole(to_comal(sent))
    last = "\n".join(_texts(seen[-1]))
    assert "[stored output: entry" in last
    # The run's own history is pydantic-ai's, every output whole.
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns] == [output(n) for n in range(1, 5)]


def test_a_processors_assembly_handed_back_is_not_recorded_again(ledger: LedgerBackend) -> None:
    # covers: INT-1
    history = ComalHistory(ledger, window=8_000, settings={"keep_recent_results": 1})
    agent = _job_agent(_model([], _jobs(4)), **_with(history, "processor"))
    result = _run(agent, "run four jobs")
    # By pydantic-ai's contract the processor's output became the run's history: comal's own
    # messages, marked as standing for the session's entries.
    marked = [m for m in result.all_messages() if m.metadata and "comal" in m.metadata]
    assert marked
    before = len(history.comal.entries())
    seen: Seen = []
    again = Agent(_model(seen), **_with(history, "processor"))
    _run(again, "and then?", result.all_messages())
    # The last reply and the new prompt, nothing twice; no branch.
    assert len(history.comal.entries()) == before + 2
    assert history.comal.scope.session == history.session_id


def test_a_shorter_history_is_what_the_model_gets(ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-1
    history = ComalHistory(ledger)
    agent = Agent(_model([]), **_with(history, "capability"))
    one = _run(agent, "keep this")
    _run(agent, "DROPPED question", one.all_messages())
    first = history.comal.scope
    seen: Seen = []
    later = Agent(_model(seen), **_with(history, "capability"))
    _run(later, "third", one.all_messages())  # the second exchange left out
    assert _texts(seen[0]) == ["keep this", "answer 1", "third"]
    # The session went on in a branch; the old one keeps every byte and names it.
    branch = history.comal.scope
    info = ledger.session(branch)
    assert info is not None and info.parent == first.session
    assert "DROPPED question" in [e.message.text for e in ledger.entries(first)]
    assert "DROPPED question" not in [e.message.text for e in history.comal.entries()]
    events = ledger.records(first, "event", kinds=(BRANCH_EVENT,))
    assert [r.body["session"] for r in events] == [branch.session]
    # A run given no history now starts over; opening the session id again follows the branch.
    seen.clear()
    _run(later, "fresh start")
    assert _texts(seen[0]) == ["fresh start"]
    reopened = ComalHistory(ledger, session=history.session_id)
    assert reopened.comal.scope == history.comal.scope


def test_a_session_opened_again_brings_its_history(ledger: LedgerBackend) -> None:
    # covers: INT-1
    first = ComalHistory(ledger)
    _run(Agent(_model([]), **_with(first, "capability")), "remember 42")
    again = ComalHistory(ledger, session=first.session_id)
    seen: Seen = []
    _run(Agent(_model(seen), **_with(again, "capability")), "what number?")
    assert _texts(seen[0]) == ["remember 42", "answer 1", "what number?"]


def test_sessions_side_by_side_on_one_ledger(any_ledger: LedgerBackend) -> None:
    # covers: INT-1, LED-4
    histories = [ComalHistory(any_ledger) for _ in range(4)]
    failures: list[BaseException] = []

    def talk(k: int) -> None:
        try:
            agent = Agent(_model([]), **_with(histories[k], "capability"))
            messages: list[ModelMessage] | None = None
            for turn in range(3):
                messages = _run(agent, f"ask {k}.{turn}", messages).all_messages()
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=talk, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for k, history in enumerate(histories):
        asked = [e.message.text for e in history.comal.entries() if e.role == "user"]
        assert asked == [f"ask {k}.{turn}" for turn in range(3)]
        assert history.comal.scope.session == history.session_id  # no branch
