"""Issue 18: conversations comal cannot read went upstream unrecorded.

An unknown role, a real Anthropic ``document`` block (text source, title, citations), an unknown
block type: the proxy forwarded the request with ``x-comal-stage: unmanaged`` and nothing in
the ledger, so what the agent saw was lost (LED-1), and a client could keep any turn out of the
record by adding one odd block. Now every block is stored — what no typed part carries as an
opaque part holding the provider's JSON — exported back exactly in its own format and as a
marked placeholder in another, and counted by its JSON; only what the provider itself refuses
(a role it does not have) is refused, with a 400 in its shape.
"""

# covers: LED-1, INT-2

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from comal.cli import app
from comal.ledger import verify
from serve._support import proxy

from ._serve_support import BODY

DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "The sky is green."},
    "title": "Facts",
    "context": "from the user's notes",
    "citations": {"enabled": True},
}
SEARCH_RESULT = {
    "source": "https://example.org/a",
    "type": "search_result",
    "title": "A",
    "content": [{"type": "text", "text": "ünïcode ‮ kept"}],
}
FUTURE = {"type": "future_block", "z": {"b": 1, "a": [1.5, None, "x"]}}
SERVER_TOOL = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}
SERVER_TOOL |= {"input": {"query": "green sky"}}
ROBOT = {"role": "robot", "content": "beep"}


def _export(db: Path, session: str, fmt: str) -> Any:
    out = CliRunner().invoke(app, ["--ledger", str(db), "export", session, "-f", fmt, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_anthropic_blocks_comal_cannot_read_are_stored_and_exported_exactly(
    tmp_path: Path,
) -> None:
    reply = {"content": [SERVER_TOOL, {"type": "text", "text": "It is green."}]}
    with proxy(tmp_path, [reply, {"content": "ok"}]) as px, px.anthropic() as client:
        first = [{"role": "user", "content": [DOCUMENT, SEARCH_RESULT, FUTURE, "?"]}]
        first[0]["content"][-1] = {"type": "text", "text": "What colour is the sky?"}
        raw = client.messages.with_raw_response.create(**{**BODY, "messages": first})
        assert raw.headers["x-comal-stage"] != "unmanaged"
        assert px.fake.requests[0].body["messages"] == first  # the upstream got it exactly
        (info,) = px.ledger.sessions()
        user, answer = (e.message for e in px.ledger.entries(info.scope))
        kept = [(p.kind, getattr(p, "format", ""), getattr(p, "raw", "")) for p in user.parts]
        expected = [("opaque", "anthropic", _compact(b)) for b in (DOCUMENT, SEARCH_RESULT, FUTURE)]
        assert kept[:3] == expected
        assert (answer.parts[0].kind, getattr(answer.parts[0], "raw", "")) == (
            "opaque",
            _compact(SERVER_TOOL),
        )
        # The next turn sends the reply back as the SDK holds it (its models of the blocks):
        # the same session, only what is new appended.
        held = raw.parse().content
        history = [*first, {"role": "assistant", "content": reply["content"]}]
        turn = [*first, {"role": "assistant", "content": held}, {"role": "user", "content": "?"}]
        client.messages.create(**{**BODY, "messages": turn})
        assert [s.id for s in px.ledger.sessions()] == [info.id]
        assert len(px.ledger.entries(info.scope)) == 4
        # Tokens are the blocks' JSON, counted.
        counter = px.ledger.counter
        stored = px.ledger.entries(info.scope)[0]
        assert stored.tokens >= counter.count(_compact(DOCUMENT)) + counter.count(_compact(FUTURE))
        assert verify(px.ledger).ok
        db = tmp_path / "ledger.db"
        exported = _export(db, info.id, "anthropic")["messages"]
        assert _compact(exported[:2]) == _compact(history)  # byte for byte, key order kept
        as_chat = _export(db, info.id, "openai")
        placeholder = as_chat[0]["content"][0]["text"]
        assert placeholder.startswith('[opaque anthropic block "document", ')
        assert "sky is green" not in json.dumps(as_chat)


def test_chat_and_responses_items_comal_cannot_read_are_kept(tmp_path: Path) -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    chat = [
        {"role": "user", "content": [{"type": "text", "text": "listen"}, audio]},
        {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "42"},
    ]
    web = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    web |= {"action": {"type": "search", "query": "q"}}
    reference = {"type": "item_reference", "id": "msg_0"}
    upload = {"type": "input_file", "file_id": "file-1"}
    items = [
        {"type": "message", "role": "user", "content": [upload]},
        web,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        reference,
    ]
    with proxy(tmp_path, [{"content": "one"}, {"content": "two"}]) as px:
        r = httpx.post(px.url + "/v1/chat/completions", json={"model": "gpt-4o", "messages": chat})
        assert r.status_code == 200 and r.headers["x-comal-stage"] != "unmanaged"
        r = httpx.post(px.url + "/v1/responses", json={"model": "gpt-5", "input": items})
        assert r.status_code == 200 and r.headers["x-comal-stage"] != "unmanaged"
        assert px.fake.requests[0].body["messages"] == chat
        assert px.fake.requests[1].body["input"] == items
        by_protocol = {s.meta["protocol"]: s for s in px.ledger.sessions()}
        db = tmp_path / "ledger.db"
        out = _export(db, by_protocol["openai_chat"].id, "openai")
        assert _compact(out[:3]) == _compact(chat)
        out = _export(db, by_protocol["openai_responses"].id, "openai-responses")
        assert _compact(out[0]["content"]) == _compact([upload])
        assert _compact([out[1], out[3]]) == _compact([web, reference])
        assert verify(px.ledger).ok


def test_only_what_the_provider_refuses_is_refused(tmp_path: Path) -> None:
    with proxy(tmp_path, []) as px:
        cases = [
            ("/v1/messages", {**BODY, "messages": [ROBOT]}),
            ("/v1/chat/completions", {"model": "gpt-4o", "messages": [ROBOT]}),
            ("/v1/responses", {"model": "gpt-5", "input": [{"type": "message", **ROBOT}]}),
        ]
        for path, body in cases:
            r = httpx.post(px.url + path, json=body)
            assert r.status_code == 400, (path, r.status_code)
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error" and "robot" in error["message"]
        assert px.fake.requests == [] and px.ledger.sessions() == []
