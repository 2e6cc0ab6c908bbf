"""Prompt-cache breakpoints: placement, and a prefix that stays byte-identical turn over turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from comal.messages import CacheHint, Message, Role, Text, ToolCall, ToolResult
from comal.providers import (
    AnthropicProvider,
    CachePolicy,
    ModelRequest,
    ModelResponse,
    OpenAIChatProvider,
    RetryPolicy,
    ToolSpec,
)
from comal.testing import FakeServer, cache_prefix, cache_serialization

MODEL = "claude-sonnet-4-6"
SYSTEM = "You are a careful agent. Rules: never guess; read before you write."
TOOLS: list[ToolSpec] = [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
    {"name": "write", "description": "Write a file", "input_schema": {"type": "object"}},
]
REPLIES = [
    {"content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"p": "a"}}]},
    {"content": [{"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"p": "b"}}]},
    {"content": "Both files say hello."},
    {"content": "Done."},
]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(REPLIES) as s:
        yield s


@pytest.fixture
def claude(server: FakeServer) -> Iterator[AnthropicProvider]:
    with AnthropicProvider(
        api_key="k", base_url=server.anthropic_base_url, retry=RetryPolicy(attempts=1)
    ) as p:
        yield p


def markers(body: dict[str, Any]) -> list[str]:
    """Where the request's cache_control markers are, as readable paths."""
    found = []
    for i, tool in enumerate(body.get("tools", [])):
        if "cache_control" in tool:
            found.append(f"tools[{i}]")
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for i, msg in enumerate(body["messages"]):
        content = msg["content"]
        if isinstance(content, list):
            found += [f"messages[{i}][{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return found


def run_session(provider: AnthropicProvider, turns: int) -> list[ModelResponse]:
    """An agent loop: each tool call gets a result, every turn resends the whole history."""
    history = [Message.user("Read a and b, then tell me what they say.")]
    out = []
    for _ in range(turns):
        req = ModelRequest(model=MODEL, system=SYSTEM, tools=TOOLS, messages=history)
        response = provider.request(req)
        out.append(response)
        history = [*history, response.message]
        for call in response.message.tool_calls:
            history.append(Message.tool(call.id, f"contents of {json.loads(call.arguments)['p']}"))
        if not response.message.tool_calls:
            history.append(Message.user("Thanks. Anything else?"))
    return out


def test_breakpoints_on_last_tool_system_and_last_message(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    run_session(claude, 3)
    bodies = [r.body for r in server.requests]
    assert markers(bodies[0]) == ["tools[1]", "system[0]", "messages[0][0]"]
    # Turn 3 resends: user, assistant(call), user(result), assistant(call), user(result).
    assert markers(bodies[2]) == ["tools[1]", "system[0]", "messages[4][0]"]
    assert all(len(markers(b)) <= 4 for b in bodies)


def test_prefix_is_byte_identical_turn_over_turn(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    run_session(claude, 4)
    serial = [cache_serialization(r.body) for r in server.requests]
    for before, after in zip(server.requests, serial[1:], strict=False):
        prefix = cache_prefix(before.body)
        # Everything the previous request cached — tools, system, the whole conversation up to
        # its last breakpoint — is the start of the next request, byte for byte.
        assert prefix and after.startswith(prefix)
    # The prefix grows: each turn caches more than the one before.
    sizes = [len(cache_prefix(r.body)) for r in server.requests]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


def test_stable_prefix_leaves_the_dynamic_tail_unmarked(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    # The last user message carries a per-turn preamble (time, channel): not worth caching.
    history = [
        Message.user("first"),
        Message.assistant("ok"),
        Message.user("[12:00 via cli]\nsecond"),
    ]
    policy = CachePolicy(stable_messages=2, ttl="1h")
    claude.request(ModelRequest(model=MODEL, system=SYSTEM, messages=history, cache=policy))
    body = server.requests[0].body
    assert markers(body) == ["system[0]", "messages[1][0]"]
    assert body["messages"][1]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][2]["content"] == [{"type": "text", "text": "[12:00 via cli]\nsecond"}]


def test_placement_replaces_hints_already_on_parts(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    # Hints from an imported transcript would add markers at stale places (and break the limit
    # of four); with the policy on, the adapter alone decides.
    hinted = Message(Role.USER, (Text("old", CacheHint()),))
    call = ToolCall("toolu_9", "read", '{"p":"z"}', cache=CacheHint())
    history = [
        hinted,
        Message.assistant("", call),
        Message(Role.TOOL, (ToolResult("toolu_9", "zz", cache=CacheHint()),)),
    ]
    claude.request(ModelRequest(model=MODEL, system=SYSTEM, tools=TOOLS, messages=history))
    assert markers(server.requests[0].body) == ["tools[1]", "system[0]", "messages[2][0]"]


def test_policy_off_sends_the_parts_own_hints(
    claude: AnthropicProvider, server: FakeServer
) -> None:
    # covers: CCH-1
    history = [Message(Role.USER, (Text("keep me", CacheHint(ttl="5m")),)), Message.user("q")]
    claude.request(
        ModelRequest(model=MODEL, system=SYSTEM, messages=history, cache=CachePolicy.off())
    )
    body = server.requests[0].body
    assert body["system"] == SYSTEM  # a plain string, exactly as given
    assert markers(body) == ["messages[0][0]"]
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


def test_openai_gets_no_cache_markers(server: FakeServer) -> None:
    # covers: CCH-1
    history = [Message(Role.USER, (Text("hinted", CacheHint()),))]
    with OpenAIChatProvider(api_key="k", base_url=server.openai_base_url) as gpt:
        gpt.request(ModelRequest(model="gpt-4.1", system=SYSTEM, tools=TOOLS, messages=history))
        gpt.request(ModelRequest(model="gpt-4.1", messages=history, cache=CachePolicy.off()))
    first, second = (r.raw for r in server.requests)
    assert b"cache_control" not in first  # OpenAI caches prefixes by itself
    assert b"cache_control" in second  # policy off: the part's own hint goes out as it is
