"""The real Claude Code CLI through `comal serve`, against a scripted FakeServer upstream.

# covers: LED-1, LED-3, LIM-2, LIM-3, LIM-4, TOK-1, TOK-3, EVI-1

Claude Code (`@anthropic-ai/claude-code`, installed by `make node`) runs `claude -p` with
ANTHROPIC_BASE_URL at the proxy. The upstream script makes it run real Bash commands over many
turns under a small window, so the engine references old outputs and derives a checkpoint; one
reply calls EvidenceRead, which the proxy must run itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from comal.agent import Config
from comal.ledger import verify
from comal.messages import Role, ToolCall
from comal.serve import RECALL_EVENT
from comal.serve._turn import EVIDENCE_TOOL

from ._support import assert_pairs_whole, input_tokens, node_tool, proxy, upstream

TURNS = 16
RECALL_AT = 12
WINDOW = 40_000

# The checkpoint path through a real client: with the default settings the engine's
# references alone keep this session under the trigger (they come first since issue 19's
# item 16), and the run would never derive one.
CHECKPOINTING = Config(engine_settings={"yield_protected_to_references": False})


def _seq(turn: int) -> tuple[int, int]:
    return turn * 10000 + 1, turn * 10000 + 1200


def _script() -> list[dict[str, Any]]:
    script: list[dict[str, Any]] = []
    for turn in range(TURNS):
        if turn == RECALL_AT:
            # Entry 4 is the first tool result (user, system, assistant, result).
            call = {"type": "tool_use", "id": "toolu_recall", "name": EVIDENCE_TOOL}
            usage = {"input_tokens": 900, "output_tokens": 9}
            script.append(
                {"content": [{**call, "input": {"entry": 4, "limit": 200}}], "usage": usage}
            )
        a, b = _seq(turn)
        script.append(
            {
                "content": [
                    {"type": "text", "text": f"Step {turn}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn:02d}",
                        "name": "Bash",
                        "input": {"command": f"seq {a} {b}", "description": f"step {turn}"},
                    },
                ],
                "usage": {"input_tokens": 1000 + turn, "output_tokens": 20},
            }
        )
    script.append({"content": "All done.", "usage": {"input_tokens": 3000, "output_tokens": 3}})
    return script


def test_claude_code_runs_many_turns_through_the_proxy(tmp_path: Path) -> None:
    claude = node_tool("claude")
    home = tmp_path / "home"
    home.mkdir()
    with proxy(tmp_path, _script(), context_window=WINDOW, operator=CHECKPOINTING) as px:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": px.url,
            "ANTHROPIC_API_KEY": "anything",
            # Side queries (titles, suggestions) would take script entries in a racy order.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
        }
        done = subprocess.run(
            [
                str(claude),
                "-p",
                "count for me",
                "--output-format",
                "json",
                "--allowedTools",
                "Bash",
            ],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        result = json.loads(done.stdout)
        assert result["result"] == "All done.", result
        px.fake.assert_complete()
        led = px.ledger
        sessions = led.sessions()
        assert len(sessions) == 1, [s.meta for s in sessions]
        scope = sessions[0].scope
        entries = led.entries(scope)
        messages = [e.message for e in entries]

        # Every tool result is in the ledger byte for byte, once.
        results = {
            m.tool_result.call_id: m.tool_result for m in messages if m.tool_result is not None
        }
        for turn in range(TURNS):
            a, b = _seq(turn)
            expected = "\n".join(str(i) for i in range(a, b + 1))
            assert results[f"toolu_{turn:02d}"].content == expected
        calls = [c for m in messages for c in m.tool_calls]
        assert len(calls) == len({c.id for c in calls}) == TURNS + 1
        assert messages[-1].role is Role.ASSISTANT and messages[-1].text == "All done."
        assert verify(led).ok

        # The recall ran in the proxy, judged and receipted; the client never saw it.
        recall = led.records(scope, "event", kinds=(RECALL_EVENT,))
        assert len(recall) == 1
        receipts = led.records(scope, "receipt")
        assert [r.body["status"] for r in receipts] == ["ok"]
        internal = set(recall[0].body["entries"])
        for e in entries:
            for c in e.message.tool_calls:
                assert (c.name == EVIDENCE_TOOL) == (e.id in internal)
        client_results = [
            e.message.tool_result for e in entries if e.message.tool_result and e.id not in internal
        ]
        assert all(not r.is_error for r in client_results)

        # Every upstream request fits the window and splits no pair.
        stages = set()
        counter = led.counter
        for recorded in px.fake.requests:
            sent = upstream("anthropic", recorded)
            assert input_tokens(counter, sent) + (sent.max_tokens or 0) <= WINDOW
            assert_pairs_whole(sent.messages)
            offered = {t.get("name") for t in sent.tools}
            for m in sent.messages:
                for c in m.tool_calls:
                    assert isinstance(c, ToolCall)
                    assert c.name in offered | {"Bash"}
        for req in led.requests(scope):
            stages.add(req.meta.get("stage"))
        assert "references" in stages or "checkpoint" in stages, stages
        assert led.checkpoints(scope), "the small window must have made the engine checkpoint"
        assert any(r.meta.get("recall_offered") for r in led.requests(scope))
        # One request record per upstream request, each with its measured usage (TOK-1).
        records = led.requests(scope)
        assert len(records) == len(px.fake.requests)
        assert all(r.new_input is not None and r.output is not None for r in records)


def test_claude_code_with_and_without_a_proxy_key(tmp_path: Path) -> None:
    """# covers: LED-2 — the key travels in ANTHROPIC_CUSTOM_HEADERS; the client's own key
    still goes upstream; without the key Claude Code stops at once with the proxy's 401."""
    claude = node_tool("claude")
    home = tmp_path / "home"
    home.mkdir()
    with proxy(tmp_path, [{"content": "hello"}]) as px:
        _, key = px.ledger.add_proxy_key("acme", "claude")
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": px.url,
            "ANTHROPIC_API_KEY": "provider-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        args = [str(claude), "-p", "hi", "--output-format", "json"]
        run = {"cwd": home, "capture_output": True, "text": True, "timeout": 120}
        ok = subprocess.run(
            args, env={**env, "ANTHROPIC_CUSTOM_HEADERS": f"x-comal-key: {key}"}, **run
        )  # type: ignore[call-overload]
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert json.loads(ok.stdout)["result"] == "hello"
        (sent,) = px.fake.requests
        assert sent.headers["x-api-key"] == "provider-key" and "x-comal-key" not in sent.headers
        assert [s.tenant for s in px.ledger.sessions()] == ["acme"]
        refused = subprocess.run(args, env=env, **run)  # type: ignore[call-overload]
        assert refused.returncode != 0
        assert "proxy key is required" in json.loads(refused.stdout)["result"]
        assert len(px.fake.requests) == 1
