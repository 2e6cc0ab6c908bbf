"""OpenAI Chat Completions ↔ canonical messages: lossless both ways in the normal form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from _wire_strategies import ROUND_TRIP, chat_sequences
from comal.errors import InputError, UserError
from comal.messages import Media, Message, Reasoning, Role, Text, ToolCall, ToolResult
from comal.messages.wire import PROVIDER_OPENAI_CHAT, from_openai_chat, to_openai_chat
from conftest import corpus_dir

# The keys of the Chat Completions normal form; everything else in a transcript file is
# recorder metadata (mini-swe-agent's ``extra``, streaming ``index``, ``function_call: null``).
_KEYS = {"role", "content", "name", "reasoning_content", "tool_calls", "tool_call_id"}


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k in _KEYS and v is not None}
    if message["role"] == "assistant":
        out["content"] = message.get("content")
    if "tool_calls" in out:
        out["tool_calls"] = [
            {"id": c["id"], "type": c["type"], "function": c["function"]} for c in out["tool_calls"]
        ]
    return out


def _json(value: object) -> Any:
    return json.loads(json.dumps(value))


@ROUND_TRIP
@given(chat_sequences())
def test_canonical_round_trip(messages: list[Message]) -> None:
    # covers: LED-1
    wire = to_openai_chat(messages)
    assert from_openai_chat(_json(wire)) == messages
    assert _json(to_openai_chat(from_openai_chat(_json(wire)))) == _json(wire)


@pytest.mark.parametrize(
    "name",
    [
        "deepseek-reasoner__sqlfluff__sqlfluff-1733.traj.json",
        "deepseek-chat__astropy__astropy-7746.traj.json",
        "test_data_github_issue.traj.json",
    ],
)
def test_mini_swe_agent_transcripts_round_trip(name: str) -> None:
    # covers: LED-1
    data = json.loads((corpus_dir() / "mini-swe-agent" / name).read_text(encoding="utf-8"))
    raw = data["messages"] if isinstance(data, dict) else data
    wire = [_normal(m) for m in raw if m["role"] != "exit"]
    messages = from_openai_chat(wire)
    assert to_openai_chat(messages) == wire
    # Tool output survives byte for byte, and reasoning is kept with its provider tag.
    tool_outputs = [m["content"] for m in wire if m["role"] == "tool"]
    assert [m.tool_result.content for m in messages if m.tool_result] == tool_outputs
    reasoning = [p for m in messages for p in m.parts if isinstance(p, Reasoning)]
    assert len(reasoning) == sum("reasoning_content" in m for m in wire)
    assert all(r.provider == PROVIDER_OPENAI_CHAT for r in reasoning)


def test_realistic_payload_round_trips() -> None:
    # covers: LED-1
    wire: list[dict[str, Any]] = [
        {"role": "developer", "content": "Answer tersely.\r\n"},
        {
            "role": "user",
            "name": "ana",
            "content": [
                {"type": "text", "text": "What is in this screenshot? 🖼️"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.com/shot.jpg", "detail": "high"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Look first.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "ls -la"}'},
                },
                {
                    "id": "call_2",
                    "type": "custom",
                    "custom": {"name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "total 0\r\n\n"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "name": "apply_patch",
            "content": [{"type": "text", "text": "Done!"}],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Big doc", "cache_control": {"type": "ephemeral"}}
            ],
        },
        {"role": "assistant", "content": ""},
    ]
    messages = from_openai_chat(wire)
    assert to_openai_chat(messages) == wire
    assert messages[2].parts == (
        Reasoning("Look first.", provider=PROVIDER_OPENAI_CHAT),
        ToolCall("call_1", "bash", '{"command": "ls -la"}'),
        ToolCall("call_2", "apply_patch", "*** Begin Patch\n*** End Patch", "custom"),
    )
    assert messages[1].parts[1] == Media("image/png", data="iVBORw0KGgo=")
    assert messages[3].tool_result == ToolResult("call_1", "total 0\r\n\n")
    assert messages[4].tool_result == ToolResult("call_2", (Text("Done!"),), name="apply_patch")


def test_documented_normalisations() -> None:
    # covers: LED-1
    wire: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "one part"}]},
        {"role": "assistant", "tool_calls": []},
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": "é"}}}],
        },
    ]
    assert to_openai_chat(from_openai_chat(wire)) == [
        {"role": "user", "content": "one part"},
        {"role": "assistant", "content": None},
        {
            "role": "assistant",
            "content": "x",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":"é"}'}}
            ],
        },
    ]


def test_canonical_parts_are_laid_out_and_foreign_reasoning_is_not_sent() -> None:
    # covers: LED-1
    message = Message(
        Role.ASSISTANT,
        (
            ToolCall("c1", "f", "{}"),
            Text("after the call"),
            Reasoning("hidden", signature="sig", provider="anthropic"),
            Reasoning("mine"),
        ),
    )
    tool = Message.tool("c1", "ok", is_error=True)
    assert to_openai_chat([message, tool]) == [
        {
            "role": "assistant",
            "content": "after the call",
            "reasoning_content": "mine",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


def test_unrepresentable_canonical_content_is_refused() -> None:
    # covers: LED-1
    with pytest.raises(UserError, match="media parts in assistant messages"):
        to_openai_chat([Message(Role.ASSISTANT, (Media("image/png", data="AA=="),))])
    with pytest.raises(UserError, match="neither data nor a reference"):
        to_openai_chat([Message(Role.USER, (Media("image/png"),))])


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        ([{"role": "robot", "content": "x"}], "[0].role"),
        ([{"role": "user", "content": [{"type": None}]}], "[0].content[0].type"),
        ([{"role": "tool", "content": "x"}], "[0].tool_call_id"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "c", "type": "web"}]}],
            "[0].tool_calls[0].type",
        ),
        (["not an object"], "[0]"),
    ],
)
def test_malformed_wire_names_the_field(wire: list[Any], field: str) -> None:
    # covers: LED-1
    with pytest.raises(InputError) as caught:
        from_openai_chat(wire)
    assert caught.value.field == field
    assert "OpenAI Chat Completions" in str(caught.value)
