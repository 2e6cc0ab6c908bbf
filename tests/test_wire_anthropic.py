"""Anthropic Messages ↔ canonical messages: lossless both ways in the normal form."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from _wire_strategies import ROUND_TRIP, anthropic_sequences
from comal.errors import InputError, UserError
from comal.messages import (
    CacheHint,
    Media,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from comal.messages.wire import (
    PROVIDER_ANTHROPIC,
    from_anthropic,
    from_anthropic_message,
    to_anthropic,
)
from conftest import corpus_dir

CLAUDE_CODE = [
    "cclog_representative_messages.jsonl",
    "cclog_todowrite_examples.jsonl",
    "ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
]


def _json(value: object) -> Any:
    return json.loads(json.dumps(value))


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    """A wire message in Anthropic's normal form, applying only the documented normalisations."""
    content = message["content"]
    if isinstance(content, str):
        return {"role": message["role"], "content": content}
    blocks = []
    for block in content:
        if block.get("type") == "tool_result" and block.get("is_error") is False:
            block = {k: v for k, v in block.items() if k != "is_error"}
        blocks.append(block)
    lone_text = (
        len(blocks) == 1 and blocks[0]["type"] == "text" and "cache_control" not in blocks[0]
    )
    if message["role"] == "user" and lone_text:
        return {"role": "user", "content": blocks[0]["text"]}
    return {"role": message["role"], "content": blocks}


def _merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic's normal form for a sequence: a user message that holds only tool results
    absorbs the user message right after it (Claude Code writes them as separate lines)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        prev = out[-1]["content"] if out and out[-1]["role"] == "user" else None
        if message["role"] == "user" and isinstance(prev, list) and prev:
            if all(b["type"] == "tool_result" for b in prev):
                content = message["content"]
                blocks = (
                    [{"type": "text", "text": content}] if isinstance(content, str) else content
                )
                out[-1] = {"role": "user", "content": prev + blocks}
                continue
        out.append(message)
    return out


@ROUND_TRIP
@given(anthropic_sequences())
def test_canonical_round_trip(messages: list[Message]) -> None:
    # covers: LED-1
    wire = to_anthropic(messages)
    assert from_anthropic(_json(wire)) == messages
    assert _json(to_anthropic(from_anthropic(_json(wire)))) == _json(wire)


@pytest.mark.parametrize("name", CLAUDE_CODE)
def test_claude_code_messages_round_trip(name: str) -> None:
    # covers: LED-1
    path = corpus_dir() / "claude-code" / name
    seen = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if not isinstance(message, dict) or "content" not in message:
            continue
        wire = {"messages": [_normal(message)]}
        messages = from_anthropic(wire)
        assert to_anthropic(messages) == wire
        if message["role"] == "assistant":
            # The response body (id, model, usage …) reads as the same assistant message.
            assert [from_anthropic_message(message)] == messages
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "tool_result" and isinstance(block["content"], str):
                assert any(
                    m.tool_result
                    == ToolResult(
                        block["tool_use_id"], block["content"], bool(block.get("is_error"))
                    )
                    for m in messages
                )
        seen += 1
    assert seen > 0


def test_claude_code_web_session_round_trips_whole() -> None:
    # covers: LED-1
    data = json.loads(
        (corpus_dir() / "claude-code-web-json" / "simonw_sample_session.json").read_text(
            encoding="utf-8"
        )
    )
    wire = {"messages": _merged([_normal(line["message"]) for line in data["loglines"]])}
    messages = from_anthropic(wire)
    assert to_anthropic(messages) == wire
    thinking = messages[1].parts[0]
    assert thinking == Reasoning(
        wire["messages"][1]["content"][0]["thinking"], provider="anthropic"
    )
    assert messages[2].tool_result == ToolResult("toolu_write_001", "File written successfully")


def test_realistic_request_round_trips() -> None:
    # covers: LED-1
    wire: dict[str, Any] = {
        "system": [
            {"type": "text", "text": "You are a coding agent.\r\n"},
            {
                "type": "text",
                "text": "Tools follow.",
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
        ],
        "messages": [
            {"role": "user", "content": "List the files, then show me logo.png 🎨"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Use Bash.",
                        "signature": "EqQBCkgIARABGAIiQL==",
                    },
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a="},
                    {"type": "text", "text": "Listing."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01A",
                        "name": "Bash",
                        "input": {"command": "ls -la"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_01B",
                        "name": "Read",
                        "input": {"file_path": "/p/logo.png", "limit": 2.5, "opts": [None, True]},
                        "cache_control": {"type": "ephemeral"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A",
                        "content": "a\r\nb\n",
                        "is_error": True,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01B",
                        "content": [
                            {"type": "text", "text": "PNG 32x32"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": "iVBORw==",
                                },
                            },
                        ],
                        "cache_control": {"type": "ephemeral", "ttl": "5m"},
                    },
                    {"type": "text", "text": "Thanks — now a PDF:"},
                    {
                        "type": "document",
                        "source": {"type": "url", "url": "https://example.com/spec.pdf"},
                    },
                ],
            },
        ],
    }
    messages = from_anthropic(wire)
    assert to_anthropic(messages) == wire
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.USER,
    ]
    assert messages[0].parts[1] == Text("Tools follow.", CacheHint("ephemeral", "1h"))
    assert messages[2].parts[:2] == (
        Reasoning("Use Bash.", signature="EqQBCkgIARABGAIiQL==", provider=PROVIDER_ANTHROPIC),
        Reasoning(data="EmwKAhgBEgy3va3pzix/LafPsn4a=", redacted=True, provider=PROVIDER_ANTHROPIC),
    )
    assert messages[2].parts[4] == ToolCall(
        "toolu_01B",
        "Read",
        '{"file_path":"/p/logo.png","limit":2.5,"opts":[null,true]}',
        cache=CacheHint(),
    )
    assert messages[3].tool_result == ToolResult("toolu_01A", "a\r\nb\n", is_error=True)
    assert messages[5].parts == (
        Text("Thanks — now a PDF:"),
        Media("application/pdf", ref="https://example.com/spec.pdf"),
    )


def test_arguments_text_is_normalised_but_the_value_kept() -> None:
    # covers: LED-1
    call = ToolCall("toolu_1", "Bash", '{"command": "echo \\u00e9",  "n": 1.0}')
    request = to_anthropic([Message.assistant("", call)])
    assert request["messages"][0]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "Bash",
            "input": {"command": "echo é", "n": 1.0},
        }
    ]
    (back,) = from_anthropic(request)
    assert back.tool_calls[0].arguments == '{"command":"echo é","n":1.0}'
    assert json.loads(back.tool_calls[0].arguments) == json.loads(call.arguments)


@pytest.mark.parametrize(
    "raw", ['{"command": "ls"', "", "[1, 2]", "null", '{"_raw_arguments":"x"}']
)
def test_arguments_that_are_no_object_are_wrapped_and_restored(raw: str) -> None:
    # covers: LED-1
    call = ToolCall("toolu_1", "Bash", raw)
    request = to_anthropic([Message.assistant("", call)])
    block = request["messages"][0]["content"][0]
    assert isinstance(block, dict)
    assert block["input"] == {"_raw_arguments": raw}
    assert from_anthropic(request)[0].tool_calls == (call,)


def test_tool_results_split_and_merge_in_normal_form() -> None:
    # covers: LED-1
    messages = [
        Message.user("go"),
        Message.assistant("", ToolCall("a", "f", "{}"), ToolCall("b", "f", "{}")),
        Message.tool("a", "1"),
        Message.tool("b", (Text("2"),)),
        Message.user("and then?"),
        Message.user("hello?"),
    ]
    request = to_anthropic(messages)
    assert request["messages"][2:] == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": [{"type": "text", "text": "2"}],
                },
                {"type": "text", "text": "and then?"},
            ],
        },
        {"role": "user", "content": "hello?"},
    ]
    assert from_anthropic(request) == messages


def test_documented_normalisations() -> None:
    # covers: LED-1
    wire: dict[str, Any] = {
        "system": [{"type": "text", "text": "one block"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "before"},
                    {"type": "tool_result", "tool_use_id": "x"},
                ],
            },
            {"role": "assistant", "content": "plain"},
        ],
    }
    assert to_anthropic(from_anthropic(wire)) == {
        "system": "one block",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "x", "content": ""},
                    {"type": "text", "text": "before"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "plain"}]},
        ],
    }


def test_system_and_developer_messages() -> None:
    # covers: LED-1
    request = to_anthropic(
        [Message.system("a"), Message(Role.DEVELOPER, (Text("b"),)), Message.user("u")]
    )
    assert request == {
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "messages": [{"role": "user", "content": "u"}],
    }
    with pytest.raises(UserError, match="single system prompt"):
        to_anthropic([Message.user("u"), Message.system("late")])
    assert to_anthropic([Message.user("u")]) == {"messages": [{"role": "user", "content": "u"}]}


def test_foreign_reasoning_is_not_sent() -> None:
    # covers: LED-1
    message = Message(
        Role.ASSISTANT,
        (
            Reasoning(data="gAAAA", summary=("s",), id="rs_1", provider="openai_responses"),
            Reasoning("deepseek", provider="openai_chat"),
            Text("answer"),
        ),
    )
    assert to_anthropic([message])["messages"] == [
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}
    ]


def test_from_anthropic_message_reads_a_response_body() -> None:
    # covers: LED-1
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "", "signature": "c2ln"},
            {"type": "text", "text": "Hi", "citations": None},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    assert from_anthropic_message(body) == Message(
        Role.ASSISTANT, (Reasoning("", signature="c2ln", provider="anthropic"), Text("Hi"))
    )
    with pytest.raises(InputError):
        from_anthropic_message({"role": "user", "content": "x"})


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
        (
            {
                "messages": [
                    {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}
                ]
            },
            "messages[0].content[0].type",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": 5}]}]},
            "messages[0].content[0].type",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": [1]}],
                    }
                ]
            },
            "messages[0].content[0].input",
        ),
        (
            {"system": [{"type": "image", "source": {"type": "url", "url": "u"}}], "messages": []},
            "system[0].type",
        ),
        ({"system": "s"}, "messages"),
    ],
)
def test_malformed_wire_names_the_field(wire: dict[str, Any], field: str) -> None:
    # covers: LED-1
    with pytest.raises(InputError) as caught:
        from_anthropic(wire)
    assert caught.value.field == field
