"""Streamed turns that offer recall, through the official SDKs: the reply streams to the client
as it comes; a recall call is held, run by the proxy between two upstream calls, and the client
gets one well-formed message (its own tools only, client-side indices, summed usage) that it
can send back without the ledger branching.

# covers: EVI-1, EVI-2, OPS-3, TOK-1, LED-3
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.ledger import verify
from comal.messages import Text
from comal.serve import RECALL_EVENT
from comal.serve._sessions import SHOWN_EVENT

from ._support import Proxy, proxy, sse_lines

TURNS = 14
LOOK = "Let me look back."
FOUND = "Found it."
ROUND_1 = {"input_tokens": 100, "output_tokens": 7}
ROUND_2 = {"input_tokens": 200, "output_tokens": 11}


def _script(*, fail_after_recall: bool = False) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    for turn in range(TURNS):
        call = {"type": "tool_use", "id": f"call_{turn}", "name": "run", "input": {"n": turn}}
        script.append({"content": [call], "usage": {"input_tokens": 10, "output_tokens": 2}})
    # Entry 3 is the first tool result (user, assistant, result).
    recall = {"type": "tool_use", "id": "call_ev", "name": "EvidenceRead", "input": {"entry": 3}}
    script.append({"content": [{"type": "text", "text": LOOK}, recall], "usage": ROUND_1})
    if fail_after_recall:
        script.append({"error": "server"})
        return script
    run = {"type": "tool_use", "id": "call_last", "name": "run", "input": {"n": 99}}
    script.append({"content": [{"type": "text", "text": FOUND}, run], "usage": ROUND_2})
    script.append({"content": "Done.", "usage": {"input_tokens": 10, "output_tokens": 2}})
    return script


def _output(turn: int) -> str:
    return "\n".join(f"{turn}:{i} some output line" for i in range(60))


# -- one streamed turn per route, through the official SDK: (calls, texts, usage, events) --------


def _anthropic_turn(px: Proxy, messages: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"name": "run", "description": "run", "input_schema": {"type": "object"}}]
    client = px.anthropic()
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=1000, tools=tools, messages=messages
    ) as stream:  # type: ignore[arg-type]
        events = [e.model_dump() for e in stream if e.type != "text"]
        final = stream.get_final_message()
    content = [b.model_dump(exclude_none=True) for b in final.content]
    messages.append({"role": "assistant", "content": content})
    calls = [(b.id, b.name) for b in final.content if b.type == "tool_use"]
    starts = [e["index"] for e in events if e["type"] == "content_block_start"]
    return {
        "calls": calls,
        "texts": [b.text for b in final.content if b.type == "text"],
        "usage": (final.usage.input_tokens, final.usage.output_tokens),
        "well_formed": starts == list(range(len(final.content)))
        and [e["type"] for e in events].count("message_start") == 1
        and [e["type"] for e in events].count("message_stop") == 1,
    }


def _anthropic_result(messages: list[dict[str, Any]], call_id: str, text: str) -> None:
    result = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    messages.append({"role": "user", "content": [result]})


def _responses_turn(px: Proxy, messages: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"type": "function", "name": "run", "parameters": {"type": "object"}}]
    client = px.openai()
    events = list(client.responses.create(model="gpt-4o", input=messages, tools=tools, stream=True))  # type: ignore[arg-type]
    (done,) = [e for e in events if e.type == "response.completed"]
    final = done.response
    for item in final.output:
        messages.append(item.model_dump(exclude_none=True))
    seqs = [e.sequence_number for e in events]
    added = [e.output_index for e in events if e.type == "response.output_item.added"]
    (created,) = [e for e in events if e.type == "response.created"]
    assert final.usage is not None
    return {
        "calls": [(i.call_id, i.name) for i in final.output if i.type == "function_call"],
        "texts": [i.content[0].text for i in final.output if i.type == "message"],  # type: ignore[union-attr]
        "usage": (final.usage.input_tokens, final.usage.output_tokens),
        "well_formed": seqs == list(range(len(seqs)))
        and added == list(range(len(final.output)))
        and created.response.id == final.id,
    }


def _responses_result(messages: list[dict[str, Any]], call_id: str, text: str) -> None:
    messages.append({"type": "function_call_output", "call_id": call_id, "output": text})


def _chat_turn(px: Proxy, messages: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    client = px.openai()
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = ""
    calls: dict[int, dict[str, str]] = {}
    usage = None
    for chunk in chunks:
        if chunk.usage is not None:
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for c in choice.delta.tool_calls or []:
                slot = calls.setdefault(c.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += c.id or ""
                slot["name"] += (c.function.name or "") if c.function else ""
                slot["arguments"] += (c.function.arguments or "") if c.function else ""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(calls.items())
        ]
    messages.append(message)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    return {
        "calls": [(c["id"], c["name"]) for _, c in sorted(calls.items())],
        "texts": [text] if text else [],
        "usage": usage,
        "well_formed": len({c.id for c in chunks}) == 1
        and [f for f in finishes if f] == [finishes[-1]],
    }


def _chat_result(messages: list[dict[str, Any]], call_id: str, text: str) -> None:
    messages.append({"role": "tool", "tool_call_id": call_id, "content": text})


DRIVERS = {
    "anthropic": (_anthropic_turn, _anthropic_result, "user"),
    "openai_responses": (_responses_turn, _responses_result, "user"),
    "openai_chat": (_chat_turn, _chat_result, "user"),
}


def _assistant_texts(protocol: str, body: dict[str, Any]) -> list[str]:
    """The text of each assistant message (or output item) of an upstream request."""
    if protocol == "openai_responses":
        return [
            "".join(p.get("text", "") for p in item.get("content", []))
            for item in body["input"]
            if item.get("role") == "assistant"
        ]
    out = []
    for m in body["messages"]:
        if m.get("role") != "assistant":
            continue
        content = m.get("content")
        if isinstance(content, list):
            out.append("".join(b.get("text", "") for b in content if b.get("type") == "text"))
        else:
            out.append(content or "")
    return out


@pytest.mark.parametrize("protocol", ["anthropic", "openai_responses", "openai_chat"])
def test_a_streamed_turn_continues_across_a_recall(tmp_path: Path, protocol: str) -> None:
    turn_of, result_of, _ = DRIVERS[protocol]
    # Room for the recall tools the proxy adds (memory_search joined them) and the recall step
    # itself: the next request must still carry that step verbatim, not behind a checkpoint.
    with proxy(tmp_path, _script(), context_window=6_400) as px:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        seen: list[str] = []
        spliced: dict[str, Any] | None = None
        for turn in range(TURNS + 2):
            got = turn_of(px, messages)
            assert got["well_formed"], (turn, got)
            seen += [name for _, name in got["calls"]]
            if not got["calls"]:
                assert got["texts"] == ["Done."]
                break
            if turn == TURNS:
                spliced = got
            ((call_id, _),) = got["calls"]
            result_of(messages, call_id, _output(turn))
        assert set(seen) == {"run"}, f"the client saw {sorted(set(seen))}"
        px.fake.assert_complete()
        assert spliced is not None
        # One message: the first round's text, then the second round's, then its call.
        if protocol == "openai_chat":
            assert spliced["texts"] == [LOOK + FOUND]
        else:
            assert spliced["texts"] == [LOOK, FOUND]
        assert spliced["calls"] == [("call_last", "run")]
        both = ROUND_1["input_tokens"] + ROUND_2["input_tokens"]
        assert spliced["usage"] == (both, ROUND_1["output_tokens"] + ROUND_2["output_tokens"])
        # The client sent that message back and stayed on its session.
        (info,) = px.ledger.sessions()
        scope = info.scope
        (shown,) = px.ledger.records(scope, "event", kinds=(SHOWN_EVENT,))
        (recall,) = px.ledger.records(scope, "event", kinds=(RECALL_EVENT,))
        (receipt,) = px.ledger.records(scope, "receipt")
        assert receipt.body["operation"] == "EvidenceRead" and receipt.body["status"] == "ok"
        # Upstream got the true history: the recall step, then the second round's message, not
        # the client's spliced copy.
        texts = _assistant_texts(protocol, px.fake.requests[-1].body)
        assert LOOK in texts and FOUND in texts
        assert not any(LOOK in t and FOUND in t for t in texts)
        stored = [
            "".join(p.text for p in e.message.parts if isinstance(p, Text))
            for e in px.ledger.entries(scope)
            if e.role == "assistant"
        ]
        assert stored.count(LOOK) == 1 and stored.count(FOUND) == 1
        requests = px.ledger.requests(scope)
        assert len(requests) == len(px.fake.requests)
        recalls = [r for r in requests if r.meta.get("recall")]
        assert len(recalls) == 1 and recalls[0].output == ROUND_1["output_tokens"]
        assert shown.body["entry"] not in recall.body["entries"]
        assert verify(px.ledger).ok


def test_the_first_round_reaches_the_client_before_the_turn_ends(tmp_path: Path) -> None:
    """The second upstream call fails: the client already has the first round's text, then an
    error event (a whole-read turn would have shown it nothing); the recall step is kept."""
    with proxy(tmp_path, _script(fail_after_recall=True), context_window=6_000) as px:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for turn in range(TURNS):
            got = _anthropic_turn(px, messages)
            ((call_id, _),) = got["calls"]
            _anthropic_result(messages, call_id, _output(turn))
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "stream": True,
            "tools": [{"name": "run", "description": "run", "input_schema": {"type": "object"}}],
            "messages": messages,
        }
        with httpx.stream("POST", f"{px.url}/v1/messages", json=body, timeout=60) as r:
            assert r.status_code == 200
            raw = r.read()
        events = sse_lines(raw)
        kinds = [e["type"] for e in events]
        text = "".join(
            e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta"
        )
        assert text == LOOK
        assert kinds[0] == "message_start" and kinds[-1] == "error"
        assert "message_stop" not in kinds
        assert "EvidenceRead" not in json.dumps(events)
        px.fake.assert_complete()
        (info,) = px.ledger.sessions()
        assert len(px.ledger.records(info.scope, "event", kinds=(RECALL_EVENT,))) == 1
        last = px.ledger.requests(info.scope)[-1]
        assert last.meta.get("error") == 500 and last.meta.get("after_recall")
        assert verify(px.ledger).ok
