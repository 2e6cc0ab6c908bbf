"""The official SDKs through the proxy: all three routes, streamed and whole.

# covers: LED-1, LED-3, TOK-1, TOK-3
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from comal.messages import Role

from ._support import proxy

TOOL = {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"q": "x"}}
USAGE = {"input_tokens": 11, "output_tokens": 4, "cache_read_input_tokens": 2}


def test_anthropic_sdk_whole_and_streamed(tmp_path: Path) -> None:
    script = [
        {"content": [{"type": "text", "text": "Let me look."}, TOOL], "usage": USAGE},
        {"content": "Found it.", "usage": USAGE},
    ]
    with proxy(tmp_path, script) as px:
        client = px.anthropic(api_key="sk-test", max_retries=0)
        tools = [{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}]
        history: list[dict[str, object]] = [{"role": "user", "content": "find x"}]
        first = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=256, messages=history, tools=tools
        )
        assert first.stop_reason == "tool_use"
        history.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
        result = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "x = 42"}
        history.append({"role": "user", "content": [result]})
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=256, messages=history, tools=tools
        ) as stream:
            text = stream.get_final_text()
        assert text == "Found it."
        # The client's key went upstream unchanged.
        for r in px.fake.requests:
            sent = r.headers.get("x-api-key") or r.headers["authorization"].removeprefix("Bearer ")
            assert sent == "sk-test"
        (info,) = px.ledger.sessions()
        roles = [e.role for e in px.ledger.entries(info.scope)]
        assert roles == ["user", "assistant", "tool", "assistant"]
        requests = px.ledger.requests(info.scope)
        assert [(r.new_input, r.cache_read, r.output) for r in requests] == [(11, 2, 4)] * 2


def test_openai_chat_whole_and_streamed(tmp_path: Path) -> None:
    script = [
        {"content": [TOOL], "usage": USAGE},
        {"content": "Found it.", "usage": USAGE},
    ]
    with proxy(tmp_path, script) as px:
        client = px.openai(api_key="sk-test", max_retries=0)
        history: list[dict[str, object]] = [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "find x"},
        ]
        first = client.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        history.append(first.choices[0].message.model_dump(exclude_none=True))
        history.append({"role": "tool", "tool_call_id": call.id, "content": "x = 42"})
        chunks = client.chat.completions.create(
            model="gpt-4o",
            messages=history,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Found it."
        (info,) = px.ledger.sessions()
        entries = px.ledger.entries(info.scope)
        assert [e.role for e in entries] == ["system", "user", "assistant", "tool", "assistant"]
        assert entries[3].message.tool_result is not None
        assert entries[3].message.tool_result.content == "x = 42"
        assert all(r.new_input is not None for r in px.ledger.requests(info.scope))


def test_openai_responses_whole_and_streamed(tmp_path: Path) -> None:
    script = [
        {"content": [TOOL], "usage": USAGE},
        {"content": "Found it.", "usage": USAGE},
    ]
    with proxy(tmp_path, script) as px:
        client = px.openai(api_key="sk-test", max_retries=0)
        first = client.responses.create(model="gpt-4.1", input="find x", instructions="brief")
        call = first.output[0]
        assert call.type == "function_call"
        items: list[dict[str, object]] = [
            {"role": "user", "content": "find x"},
            call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "x = 42"},
        ]
        with client.responses.stream(model="gpt-4.1", input=items, instructions="brief") as s:  # type: ignore[arg-type]
            final = s.get_final_response()
        assert final.output_text == "Found it."
        (info,) = px.ledger.sessions()
        entries = px.ledger.entries(info.scope)
        assert [e.role for e in entries] == ["user", "assistant", "tool", "assistant"]


def test_a_short_session_goes_upstream_byte_for_byte(tmp_path: Path) -> None:
    """Nothing to manage: the upstream body is the client's, to the byte (odd spacing kept)."""
    body = (
        b'{"model": "claude-sonnet-4-5",  "max_tokens": 100, "metadata": {"user_id": "u"},'
        b' "thinking": {"type": "enabled", "budget_tokens": 64},'
        b' "context_management": {"edits": []},'
        b' "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],'
        b' "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",'
        b' "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}, {"role": "assistant",'
        b' "content": [{"type": "thinking", "thinking": "t", "signature": "SIG=="},'
        b' {"type": "text", "text": "yo", "citations": null}]}, {"role": "user", "content": "go"}]}'
    )
    with proxy(tmp_path, [{"content": "ok"}]) as px:
        r = httpx.post(
            f"{px.url}/v1/messages?beta=true",
            content=body,
            headers={"x-api-key": "k", "anthropic-beta": "context-management-2025-06-27"},
        )
        assert r.status_code == 200, r.text
        (sent,) = px.fake.requests
        assert sent.raw == body
        assert sent.path == "/v1/messages?beta=true"
        assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
        assert r.headers["x-comal-stage"] == "verbatim"


def test_the_output_limit_is_lowered_to_fit_and_said(tmp_path: Path) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 128_000,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with proxy(tmp_path, [{"content": "ok"}], context_window=20_000) as px:
        r = httpx.post(f"{px.url}/v1/messages", json=body, headers={"x-api-key": "k"})
        assert r.status_code == 200
        (sent,) = px.fake.requests
        lowered = sent.body["max_tokens"]
        assert lowered < 20_000
        assert r.headers["x-comal-max-tokens"] == f"128000->{lowered}"
        assert {k: v for k, v in sent.body.items() if k != "max_tokens"} == {
            k: v for k, v in body.items() if k != "max_tokens"
        }


def test_history_resent_appends_only_what_is_new_and_an_edit_branches(tmp_path: Path) -> None:
    script = [{"content": "one"}, {"content": "two"}, {"content": "edited"}]
    with proxy(tmp_path, script) as px:
        url = f"{px.url}/v1/messages"
        headers = {"x-api-key": "k", "x-comal-session": "s1"}

        def send(messages: list[dict[str, object]]) -> httpx.Response:
            body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages}
            return httpx.post(url, json=body, headers=headers)

        a = [{"role": "user", "content": "first"}]
        assert send(a).status_code == 200
        b = [*a, {"role": "assistant", "content": [{"type": "text", "text": "one"}]}]
        b.append({"role": "user", "content": "second"})
        r2 = send(b)
        edited = [{"role": "user", "content": "first, edited"}]
        r3 = send(edited)
        sessions = {s.id: s for s in px.ledger.sessions()}
        assert len(sessions) == 2
        main = sessions[r2.headers["x-comal-session"]]
        texts = [e.message.text for e in px.ledger.entries(main.scope)]
        assert texts == ["first", "one", "second", "two"]
        other = sessions[r3.headers["x-comal-session"]]
        assert other.id != main.id
        assert [e.message.text for e in px.ledger.entries(other.scope)] == [
            "first, edited",
            "edited",
        ]
        # A rewind that keeps a shared start is a child (LED-3) of the session it left.
        rewind = [*a, {"role": "assistant", "content": [{"type": "text", "text": "one"}]}]
        rewind.append({"role": "user", "content": "another second"})
        px.fake.add({"content": "branch"})
        r4 = send(rewind)
        child = px.ledger.session(
            next(s for s in px.ledger.sessions() if s.id == r4.headers["x-comal-session"]).scope
        )
        assert child is not None and child.parent == main.id
        assert child.meta["fork_at"] == 2
        assert [e.role for e in px.ledger.entries(main.scope)] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert json.loads(r4.content)["content"][0]["text"] == "branch"
        assert Role.USER.value == "user"


def test_count_tokens_falls_back_to_comals_count(tmp_path: Path) -> None:
    """FakeServer has no count_tokens route (404): the proxy answers with its own count."""
    with proxy(tmp_path, []) as px:
        client = px.anthropic(api_key="sk", max_retries=0)
        counted = client.messages.count_tokens(
            model="claude-sonnet-4-5",
            system="be brief",
            messages=[{"role": "user", "content": "hello there " * 50}],
        )
        assert counted.input_tokens > 50
        assert [r.path for r in px.fake.requests] == ["/v1/messages/count_tokens"]
        assert px.ledger.sessions() == []
