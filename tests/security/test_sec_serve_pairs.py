"""Issue 18: the ledger must never accept what its own ``verify`` calls a fault.

A client sent tool calls and results that do not pair up — a call followed by more
conversation and no result, a result for a call that was never made — and the proxy stored the
exchange as it came; ``comal verify`` then reported ``split-step`` faults in a ledger nobody had
tampered with. Every provider refuses such a conversation, so the proxy now refuses it too, with
a 400 in the provider's shape, before anything is stored or forwarded.
"""

# covers: LED-1

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from comal.cli import app
from comal.ledger import verify
from serve._support import proxy

from ._serve_support import BODY

USE = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
FC = {"type": "function_call", "call_id": "fc_1", "name": "f", "arguments": "{}"}


def _anthropic(*messages: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {**BODY, "messages": list(messages)}


def _chat(*messages: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"model": "gpt-4o", "messages": list(messages)}


def _responses(*items: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": "gpt-5", "input": list(items)}


def _user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


BROKEN = [
    # A call, then the conversation goes on without its result.
    _anthropic(_user("go"), {"role": "assistant", "content": [USE]}, _user("never mind")),
    # A result that answers no call.
    _anthropic(_user("go"), {"role": "assistant", "content": "ok"}, _user([RESULT])),
    # A result given twice.
    _anthropic(
        _user("go"),
        {"role": "assistant", "content": [USE]},
        _user([RESULT, RESULT, {"type": "text", "text": "more"}]),
    ),
    _chat(_user("go"), {"role": "assistant", "tool_calls": [CALL]}, _user("never mind")),
    _chat(_user("go"), {"role": "tool", "tool_call_id": "call_9", "content": "x"}),
    _responses(_user("go"), FC, _user("never mind")),
    _responses(_user("go"), {"type": "function_call_output", "call_id": "fc_9", "output": "x"}),
]


def test_broken_tool_pairs_are_refused_before_anything_is_stored(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "x"}] * len(BROKEN)) as px:
        for path, body in BROKEN:
            r = httpx.post(px.url + path, json=body)
            assert r.status_code == 400, (body, r.status_code, r.text)
            error = r.json()["error"]
            assert error["type"] == "invalid_request_error" and "TOOL_PAIRS" in error["message"]
        assert px.fake.requests == []
        report = verify(px.ledger)
        assert report.ok and [f.kind for f in report.faults] == []
        assert px.ledger.sessions() == []
        # A call comal keeps opaque (Codex's local shell) answered by a function output: fine.
        shell = {"type": "local_shell_call", "call_id": "ls_1", "status": "completed"}
        shell |= {"action": {"type": "exec", "command": ["ls"]}}
        output = {"type": "function_call_output", "call_id": "ls_1", "output": "a.txt"}
        path, body = _responses(_user("go"), shell, output)
        assert httpx.post(px.url + path, json=body).status_code == 200
        assert verify(px.ledger).ok


def test_a_session_with_open_calls_cannot_be_split_by_the_next_request(tmp_path: Path) -> None:
    """The reply proposes a call (a step with an open call, a paused session); the client's
    next request goes on without answering it: refused, and ``comal verify`` stays clean."""
    reply = {"content": [{"type": "text", "text": "running"}, USE]}
    with proxy(tmp_path, [reply, {"content": "done"}]) as px:
        first = [_user("list the files")]
        assert httpx.post(px.url + "/v1/messages", json={**BODY, "messages": first}).is_success
        assistant = {"role": "assistant", "content": reply["content"]}
        skipped = [*first, assistant, _user("actually, stop")]
        r = httpx.post(px.url + "/v1/messages", json={**BODY, "messages": skipped})
        assert r.status_code == 400 and "toolu_1" in r.json()["error"]["message"]
        answered = [*first, assistant, _user([RESULT])]
        assert httpx.post(px.url + "/v1/messages", json={**BODY, "messages": answered}).is_success
        (info,) = px.ledger.sessions()
        assert [e.role for e in px.ledger.entries(info.scope)] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        out = CliRunner().invoke(app, ["--ledger", str(tmp_path / "ledger.db"), "verify"])
        assert out.exit_code == 0, out.output
        assert "split-step" not in out.output
