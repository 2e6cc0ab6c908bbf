"""Opaque parts: what no typed part carries exactly is kept whole and written back exactly.

# covers: LED-1, INT-2
"""

from __future__ import annotations

import json
from typing import Any

from comal.messages import Message, Opaque, Role, ToolResult, message_from_json, message_to_json
from comal.messages.wire import (
    from_anthropic,
    from_openai_chat,
    from_openai_responses,
    render_opaque,
    strip_cache,
    to_anthropic,
    to_openai_chat,
    to_openai_responses,
)
from comal.serve._wire import message_key
from comal.tokens import count_part
from comal.tokens._estimate import EstimatingCounter

DOC = {"type": "document", "source": {"type": "file", "file_id": "f1"}, "cache_control": None}
INNER = {"type": "search_result", "title": "t", "source": "s", "content": []}


def test_anthropic_tool_results_and_media_keep_what_they_cannot_type() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [INNER, image]}
    use = {"type": "tool_use", "id": "t1", "name": "Search", "input": {}}
    wire: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": [DOC]},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    }
    messages = from_anthropic(wire)
    assert messages[0].parts == (Opaque("anthropic", json.dumps(DOC, separators=(",", ":"))),)
    tool = messages[2].tool_result
    assert tool is not None and not isinstance(tool.content, str)
    assert tool.content[0].kind == "opaque" and tool.content[1].kind == "media"
    assert to_anthropic(messages) == wire
    for m in messages:  # the ledger's canonical form holds them
        assert message_from_json(message_to_json(m)) == m


def test_other_formats_get_a_marked_placeholder_and_tokens_count_the_json() -> None:
    kept = Opaque("anthropic", json.dumps(INNER))
    msg = Message(Role.USER, (kept,))
    text = to_openai_chat([msg])[0]["content"]
    assert text == render_opaque(kept)
    assert text.startswith('[opaque anthropic block "search_result"')
    (item,) = to_openai_responses([msg])
    assert item["content"] == [{"type": "input_text", "text": render_opaque(kept)}]
    counter = EstimatingCounter()
    assert count_part(counter, kept) == counter.count(kept.raw)


def test_chat_and_responses_round_trip_what_they_cannot_read() -> None:
    chat = [
        {"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]},
        {"role": "function", "name": "f", "content": "1"},
    ]
    assert to_openai_chat(from_openai_chat(chat)) == chat
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_file", "file_id": "f"}]},
        {"type": "computer_call", "call_id": "c1", "action": {"type": "click"}},
        {"type": "computer_call_output", "call_id": "c1", "output": {"type": "screenshot"}},
    ]
    messages = from_openai_responses(items)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert to_openai_responses(messages) == items


def test_sightings_of_one_block_match_whatever_their_key_order_and_cache_hint() -> None:
    a = Message(Role.USER, (Opaque("anthropic", '{"type":"x","a":1,"b":2}'),))
    b = Message(Role.USER, (Opaque("anthropic", '{"b":2,"a":1,"type":"x"}'),))
    cached = Opaque("anthropic", '{"type":"x","a":1,"b":2,"cache_control":{"type":"ephemeral"}}')
    c = strip_cache(Message(Role.USER, (cached,)))
    assert message_key(a) == message_key(b) == message_key(c)
    inner = (Opaque("anthropic", '{"type":"x","a":1}'),)
    other = (Opaque("anthropic", '{"a":1,"type":"x"}'),)
    assert message_key(Message(Role.TOOL, (ToolResult("t", inner),))) == message_key(
        Message(Role.TOOL, (ToolResult("t", other),))
    )
