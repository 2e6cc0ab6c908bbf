"""The agent end to end through the official SDKs, over real HTTP to the local FakeServer.

Each test runs once per adapter (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses):
the tool loop streamed, an OUTPUT_LENGTH response discarded with the file system observed,
CONTEXT_LENGTH recovered once, and the spend guard refusing before any HTTP request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from _agent_support import Rig, reply, rig, text, tool
from comal.agent import CONTEXT_EVENT, INCOMPLETE_EVENT, SpendCapExceeded
from comal.agent._catalog import model_catalog
from comal.context import get_engine
from comal.ledger import UsageInput
from comal.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    RetryPolicy,
    SDKProvider,
    StreamEvent,
    TextDelta,
    ToolCallStart,
)
from comal.testing import FakeServer
from comal.tokens import Usage

# The model catalog the agent sends under the default engine (recall tools of other engines
# are not offered).
LIMIT = get_engine("limit")

Build = Callable[[FakeServer], SDKProvider]
NO_RETRY = RetryPolicy(attempts=1)
ADAPTERS: dict[str, Build] = {
    "anthropic": lambda s: AnthropicProvider(
        api_key="k", base_url=s.anthropic_base_url, retry=NO_RETRY
    ),
    "openai_chat": lambda s: OpenAIChatProvider(
        api_key="k", base_url=s.openai_base_url, retry=NO_RETRY
    ),
    "openai_responses": lambda s: OpenAIResponsesProvider(
        api_key="k", base_url=s.openai_base_url, retry=NO_RETRY
    ),
}


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(chunk=7) as s:
        yield s


def max_tokens(body: dict[str, Any]) -> int:
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if key in body:
            return int(body[key])
    raise AssertionError(f"no output limit in {sorted(body)}")


def run(r: Rig, server: FakeServer, adapter: str, prompt: str, **kw: Any) -> Any:
    events: list[StreamEvent] = []
    with ADAPTERS[adapter](server) as provider:
        result = r.agent(provider, on_event=events.append, **kw).run(prompt)
    return result, events


def test_streamed_tool_loop(tmp_path: Path, server: FakeServer, adapter: str) -> None:
    # covers: OPS-3, TOK-1, TOK-2
    server.add(
        reply(
            text("Writing."),
            tool("w1", "Write", path="a.txt", content="alpha\n"),
            usage={"input_tokens": 1500, "output_tokens": 30},
        ),
        reply(tool("b1", "Bash", command="cat a.txt")),
        reply(text("Done.")),
    )
    r = rig(tmp_path)
    result, events = run(r, server, adapter, "write a.txt")
    server.assert_complete()
    assert (result.status, result.answer) == ("finished", "Done.")
    assert r.read("a.txt") == "alpha\n"
    assert all(req.body.get("stream") is True for req in server.requests)
    assert any(isinstance(e, TextDelta) for e in events)
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["Write", "Bash"]
    assert b"Wrote 6 bytes to a.txt" in server.requests[1].raw
    assert b"alpha" in server.requests[2].raw  # the Bash output went back to the model
    first = r.ledger.requests(r.scope)[0]
    assert first.protocol == adapter and first.new_input is not None
    # The catalog the model was offered: the house's, less other engines' recall tools.
    offered = model_catalog(r.house.catalog("model"), get_engine("limit"))
    assert first.meta["catalog_digest"] == offered.digest


def test_output_length_response_is_discarded(
    tmp_path: Path, server: FakeServer, adapter: str
) -> None:
    # covers: OUT-1, OUT-2, OUT-3
    server.add(
        reply(
            text("Here is the file"),
            tool("p1", "Write", path="poison.txt", content="half"),
            stop_reason="max_tokens",
        ),
        reply(text("Shorter: done.")),
    )
    r = rig(tmp_path)
    result, _ = run(r, server, adapter, "write a big file")
    assert result.answer == "Shorter: done."
    assert sorted(p.name for p in r.root.iterdir()) == []  # no tool of it ever ran
    one, two = (req.body for req in server.requests)
    assert max_tokens(two) == 2 * max_tokens(one)
    assert {k: v for k, v in one.items() if "max" not in k} == {
        k: v for k, v in two.items() if "max" not in k
    }  # the very same input, only a larger reserve
    (event,) = [e for e in r.ledger.records(r.scope, "event") if e.kind == INCOMPLETE_EVENT]
    assert [c["name"] for c in event.body["discarded_calls"]] == ["Write"]
    assert [e.role for e in r.ledger.entries(r.scope)] == ["user", "assistant"]


def test_context_length_is_recovered_once(tmp_path: Path, server: FakeServer, adapter: str) -> None:
    # covers: OUT-1, TOK-4
    server.add({"error": "context_length"}, reply(text("Fits.")))
    r = rig(tmp_path)
    result, _ = run(r, server, adapter, "huge")
    assert result.status == "finished" and len(server.requests) == 2
    (event,) = [e for e in r.ledger.records(r.scope, "event") if e.kind == CONTEXT_EVENT]
    expected = {
        "anthropic": {"input": 210345, "limit": 200000},
        "openai_chat": {"input": 131072, "limit": 128000},
        "openai_responses": None,  # "exceeds the context window": no numbers to use
    }[adapter]
    assert event.body["reported"] == expected
    assert event.body["next_window"] < event.body["window"]


def test_spend_cap_refuses_before_any_http_request(
    tmp_path: Path, server: FakeServer, adapter: str
) -> None:
    # covers: TOK-6
    r = rig(tmp_path)
    other = r.ledger.create_session("t", "another-agent")
    spent = Usage(9_990_000, 5_000, None, 4_000, None)
    now = datetime.now(UTC).isoformat()
    r.ledger.record_request(other, None, UsageInput(spent, "m", "anthropic", {"at": now}))
    server.add(reply(text("never sent")))
    with pytest.raises(SpendCapExceeded) as caught:
        run(r, server, adapter, "anything")
    assert server.requests == []
    err = caught.value
    assert (err.code, err.tier, err.cap) == ("SPEND_CAP", "hour", 10_000_000)
    assert err.spent == 9_999_000 and "No request was sent" in str(err)
    assert r.ledger.requests(r.scope) == []
