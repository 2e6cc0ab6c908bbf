"""Recall inside the proxy under the dag and pipeline engines: the engine's own recall tools
(``ctx_*``, ``session_search``) are offered upstream and run by the proxy through the house;
the client only ever sees its own tools.

# covers: DAG-7, PIP-1, OPS-3
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from comal.serve import RECALL_EVENT

from ._support import proxy

TURNS = 16
TOOLS = [{"name": "run", "description": "run a step", "input_schema": {"type": "object"}}]


def _script(recalls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    usage = {"input_tokens": 10, "output_tokens": 2}
    for turn in range(TURNS):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "run", "input": {"n": turn}}
        script.append(
            {"content": [{"type": "text", "text": f"Step {turn}."}, call], "usage": usage}
        )
    for k, recall in enumerate(recalls):
        block = {"type": "tool_use", "id": f"toolu_recall_{k}", **recall}
        script.append({"content": [block], "usage": usage})
    script.append({"content": "Done.", "usage": usage})
    return script


def _output(turn: int) -> str:
    return "\n".join(f"marker-{turn} line {i} of the output of step {turn}" for i in range(50))


def _drive(px: Any) -> tuple[str, list[str]]:
    """The client's loop (official SDK, whole replies): returns its answer and every tool name
    it was asked to run."""
    client = px.anthropic()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "work through the steps"}]
    seen: list[str] = []
    for turn in range(TURNS + 1):
        reply = client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1000,
            tools=TOOLS,
            messages=messages,
            extra_headers={"x-comal-session": "engines"},
        )
        content = [b.model_dump(exclude_none=True) for b in reply.content]
        messages.append({"role": "assistant", "content": content})
        calls = [b for b in reply.content if b.type == "tool_use"]
        seen += [c.name for c in calls]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text"), seen
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": _output(turn)} for c in calls
        ]
        messages.append({"role": "user", "content": results})
    raise AssertionError("the client never got an answer")


def _offered(px: Any) -> list[set[str]]:
    return [{t["name"] for t in r.body.get("tools", [])} for r in px.fake.requests]


@pytest.mark.parametrize(
    ("engine", "recalls"),
    [
        (
            "dag",
            [
                {"name": "ctx_search", "input": {"query": "marker-2"}},
                {"name": "ctx_expand", "input": {"entry": 3}},
            ],
        ),
        ("pipeline", [{"name": "session_search", "input": {"query": "marker-2"}}]),
    ],
)
def test_the_engines_recall_tools_run_inside_the_proxy(
    tmp_path: Path, engine: str, recalls: list[dict[str, Any]]
) -> None:
    with proxy(tmp_path, _script(recalls), context_window=6_000, engine=engine) as px:
        answer, seen = _drive(px)
        assert answer == "Done."
        assert set(seen) == {"run"}, f"the client saw {sorted(set(seen))}"
        px.fake.assert_complete()
        (info,) = px.ledger.sessions()
        scope = info.scope
        names = {r["name"] for r in recalls}
        offered = _offered(px)
        # The engine stood in for part of the history, so its recall tools went upstream,
        # beside the client's own; the first requests (a short session) went as they were.
        assert offered[0] == {"run"}
        assert all(names | {"run", "EvidenceRead"} <= o for o in offered[TURNS:])
        if engine == "dag":
            assert px.ledger.summaries(scope), "the dag engine summarized the old steps"
            assert all("session_search" not in o for o in offered)
        else:
            assert all(not any(n.startswith("ctx_") for n in o) for o in offered)
        receipts = px.ledger.records(scope, "receipt")
        assert [(r.body["operation"], r.body["status"]) for r in receipts] == [
            (r["name"], "ok") for r in recalls
        ]
        events = px.ledger.records(scope, "event", kinds=(RECALL_EVENT,))
        assert len(events) == len(recalls)
        # Each recall's result went upstream in the next request.
        last = px.fake.requests[-1].body["messages"]
        results = [
            b
            for m in last
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
            and str(b.get("tool_use_id", "")).startswith("toolu_recall")
        ]
        assert len(results) == len(recalls)
        assert all("marker-" in str(b["content"]) for b in results), results
        requests = px.ledger.requests(scope)
        assert len(requests) == len(px.fake.requests)
        assert sum(1 for r in requests if r.meta.get("recall")) == len(recalls)
