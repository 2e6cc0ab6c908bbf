"""Every tool output byte survives import.

For each format, the tool outputs are pulled out of the raw file by plain JSON walking, with no
importer code, and compared by sha256 (order and count) with the imported ``ToolResult.text``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from comal.importers import ImportedSession, load
from comal.messages import sha256_hex
from conftest import corpus_dir


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _imported(sessions: list[ImportedSession]) -> list[str]:
    return [
        sha256_hex(m.tool_result.text)
        for s in sessions
        for m in s.messages
        if m.tool_result is not None
    ]


def _files(folder: str, pattern: str = "*") -> Iterator[Path]:
    yield from sorted((corpus_dir() / folder).glob(pattern))


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def _anthropic_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def _claude_results(entries: list[dict[str, Any]], sidechain: bool) -> list[str]:
    out = []
    for e in entries:
        msg = e.get("message")
        if bool(e.get("isSidechain")) != sidechain or not isinstance(msg, dict):
            continue
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_result":
                out.append(_sha(_anthropic_result_text(block)))
    return out


def test_claude_code_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    checked = 0
    for path in _files("claude-code"):
        entries = list(_jsonl(path))
        sessions = load(path)
        main = [s for s in sessions if s.parent_key is None]
        children = [s for s in sessions if s.parent_key is not None]
        # The corpus has no rewound branches, so the main chain is every main-chain entry.
        assert _imported(main) == _claude_results(entries, sidechain=False)
        assert _imported(children) == _claude_results(entries, sidechain=True)
        checked += len(_claude_results(entries, False)) + len(_claude_results(entries, True))
    assert checked == 184


def test_claude_code_web_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    (path,) = _files("claude-code-web-json")
    lines = json.loads(path.read_text(encoding="utf-8"))["loglines"]
    expected = _claude_results(lines, sidechain=False)
    assert len(expected) == 12
    assert _imported(load(path)) == expected


def test_codex_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    checked = 0
    for path in _files("codex"):
        expected = [
            _sha(rec["payload"]["output"])
            for rec in _jsonl(path)
            if rec.get("type") == "response_item"
            and rec["payload"].get("type") in ("function_call_output", "custom_tool_call_output")
        ]
        assert _imported(load(path)) == expected
        checked += len(expected)
    assert checked == 39


def test_mini_swe_agent_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    checked = 0
    for path in _files("mini-swe-agent"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, list):
            # v1: the output of each fenced command is the next user message.
            expected = [
                _sha(m["content"])
                for prev, m in itertools.pairwise(data)
                if prev["role"] == "assistant" and m["role"] == "user"
            ]
        else:
            expected = [_sha(m["content"]) for m in data["messages"] if m["role"] == "tool"]
        assert _imported(load(path)) == expected, path.name
        checked += len(expected)
    assert checked == 758


def _openhands_results(events: list[dict[str, Any]]) -> list[str]:
    calls = {e["id"] for e in events if "action" in e and e.get("tool_call_metadata")}
    return [_sha(e["content"]) for e in events if "observation" in e and e.get("cause") in calls]


def test_openhands_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    checked = 0
    for path in _files("openhands", "*.json"):
        expected = _openhands_results(json.loads(path.read_text(encoding="utf-8")))
        assert _imported(load(path)) == expected
        checked += len(expected)
    for path in _files("openhands", "*.jsonl"):
        sessions = load(path)
        instances = list(_jsonl(path))
        assert [s.key for s in sessions] == [d["instance_id"] for d in instances]
        for session, instance in zip(sessions, instances, strict=True):
            expected = _openhands_results(instance["history"])
            assert _imported([session]) == expected
            checked += len(expected)
    assert checked == 110


def test_swe_agent_tool_outputs_are_exact() -> None:
    # covers: LED-1, LED-6
    checked = 0
    for path in _files("swe-agent"):
        data = json.loads(path.read_text(encoding="utf-8"))
        history = data["history"]
        expected = [
            _sha(m["content"])
            for prev, m in itertools.pairwise(history)
            if m["role"] == "tool" or (prev["role"] == "assistant" and m["role"] == "user")
        ]
        if history[-1]["role"] == "assistant":
            # Text-action runs: the final submit's output is only in the last trajectory step.
            expected.append(_sha(data["trajectory"][-1]["observation"]))
        assert _imported(load(path)) == expected, path.name
        checked += len(expected)
    assert checked == 94


def test_tool_arguments_keep_the_recorded_text() -> None:
    # covers: LED-1
    path = next(_files("codex", "rollout-*"))
    recorded = [
        rec["payload"]["arguments"]
        for rec in _jsonl(path)
        if rec.get("type") == "response_item" and rec["payload"].get("type") == "function_call"
    ]
    (session,) = load(path)
    assert [c.arguments for m in session.messages for c in m.tool_calls] == recorded


@pytest.mark.parametrize("name", ["deepseek-reasoner__sqlfluff__sqlfluff-1733.traj.json"])
def test_reasoning_text_is_kept(name: str) -> None:
    # covers: LED-1
    path = corpus_dir() / "mini-swe-agent" / name
    data = json.loads(path.read_text(encoding="utf-8"))
    recorded = [m["reasoning_content"] for m in data["messages"] if m["role"] == "assistant"]
    (session,) = load(path)
    kept = [p.text for m in session.messages for p in m.parts if p.kind == "reasoning"]
    assert kept == recorded


def test_claude_code_thinking_signatures_survive(tmp_path: Path) -> None:
    # covers: LED-1
    signature = "EqoBCkgIARABGAIiQL" + "x" * 64
    entry = {
        "type": "assistant",
        "uuid": "a1",
        "parentUuid": None,
        "sessionId": "s",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm", "signature": signature}],
        },
    }
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    (session,) = load(path)
    (part,) = session.messages[0].parts
    assert part.kind == "reasoning" and part.signature == signature and part.text == "hmm"


def test_text_block_fence_regex_is_not_used_for_outputs() -> None:
    # covers: LED-1
    # The synthetic call for a text action holds the command; its output is the whole next user
    # message, even when that message itself contains fenced blocks.
    path = corpus_dir() / "mini-swe-agent" / "test_data_github_issue.traj.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    (session,) = load(path)
    commands = [json.loads(c.arguments)["command"] for m in session.messages for c in m.tool_calls]
    fenced = [
        re.findall(r"```mswea_bash_command\n(.*?)\n```", m["content"], re.DOTALL)[0]
        for m in data
        if m["role"] == "assistant"
    ]
    assert commands == fenced
