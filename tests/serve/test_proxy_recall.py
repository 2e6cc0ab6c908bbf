"""Recall inside the proxy on the Chat Completions route, whole replies (the real-client tests
cover streamed Anthropic and Responses).

# covers: EVI-1, EVI-2, OPS-3, LIM-2
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from comal.serve import RECALL_EVENT

from ._support import proxy

TURNS = 20


def _script() -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    for turn in range(TURNS):
        call = {"type": "tool_use", "id": f"call_{turn}", "name": "run", "input": {"n": turn}}
        script.append({"content": [call], "usage": {"input_tokens": 10, "output_tokens": 2}})
    # Entry 3 is the first tool result (user, assistant, result).
    recall = {"type": "tool_use", "id": "call_ev", "name": "EvidenceRead", "input": {"entry": 3}}
    # A client tool proposed beside the recall is not run: the model is asked again.
    beside = {"type": "tool_use", "id": "call_beside", "name": "run", "input": {"n": -1}}
    script.append({"content": [recall, beside], "usage": {"input_tokens": 10, "output_tokens": 2}})
    script.append({"content": "Read it.", "usage": {"input_tokens": 10, "output_tokens": 2}})
    return script


def test_the_proxy_runs_evidence_read_and_returns_only_the_final_reply(tmp_path: Path) -> None:
    with proxy(tmp_path, _script(), context_window=6_000) as px:
        client = px.openai(api_key="sk", max_retries=0)
        tools = [
            {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
        ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        answer = None
        for turn in range(TURNS + 1):
            reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)  # type: ignore[arg-type]
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                answer = message.content
                break
            (call,) = message.tool_calls
            assert call.function.name == "run", f"turn {turn}: the client saw {call.function.name}"
            output = "\n".join(f"{turn}:{i} some output line" for i in range(60))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        assert answer == "Read it."
        px.fake.assert_complete()
        (info,) = px.ledger.sessions()
        (event,) = px.ledger.records(info.scope, "event", kinds=(RECALL_EVENT,))
        (receipt,) = px.ledger.records(info.scope, "receipt")
        assert receipt.body["status"] == "ok" and receipt.body["operation"] == "EvidenceRead"
        internal = px.ledger.entries(info.scope)
        recall_entries = [e for e in internal if e.id in set(event.body["entries"])]
        assert [e.role for e in recall_entries] == ["assistant", "tool", "tool"]
        read, beside = (e.message.tool_result for e in recall_entries[1:])
        assert read is not None and "0:0 some output line" in read.text
        assert beside is not None and beside.call_id == "call_beside" and beside.is_error
        offered = [
            r
            for r in px.fake.requests
            if any(
                t.get("function", {}).get("name") == "EvidenceRead" for t in r.body.get("tools", [])
            )
        ]
        assert offered, "the engine referenced outputs, so EvidenceRead was offered upstream"
        requests = px.ledger.requests(info.scope)
        assert len(requests) == len(px.fake.requests)
        assert sum(1 for r in requests if r.meta.get("recall")) == 1
