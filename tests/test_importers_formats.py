"""Mapping rules per format, on small hand-built transcripts (and a few corpus facts)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from comal.errors import ImportFormatError, UserError
from comal.importers import INTERRUPTED, detect_format, load
from comal.messages import (
    Media,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
    open_calls,
    pairs,
)
from conftest import corpus_dir


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


# --- Claude Code ----------------------------------------------------------------------------


def _cc(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=extra.pop("msg_id", f"msg_{uuid}"), model="claude-x")
        message["usage"] = extra.pop("usage", {"input_tokens": 1, "output_tokens": 1})
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "sess",
        "isSidechain": extra.pop("sidechain", False),
        "message": message,
        **extra,
    }


def _use(cid: str, name: str = "Bash", **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": inp or {"command": "ls"}}


def _res(cid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content}


def test_claude_code_merges_split_lines_and_keeps_the_final_usage(tmp_path: Path) -> None:
    # covers: LED-1
    path = _jsonl(
        tmp_path / "s.jsonl",
        [
            {"type": "summary", "summary": "Listing files", "leafUuid": "u4"},
            _cc("u1", None, "user", "list files"),
            _cc(
                "a1",
                "u1",
                "assistant",
                [{"type": "text", "text": "Sure."}],
                msg_id="m1",
                usage={"input_tokens": 5, "output_tokens": 1},
            ),
            _cc(
                "a2",
                "a1",
                "assistant",
                [_use("t1")],
                msg_id="m1",
                usage={"input_tokens": 5, "output_tokens": 9},
            ),
            _cc(
                "a3",
                "a2",
                "assistant",
                [_use("t2", "Read", file_path="x")],
                msg_id="m1",
                usage={"input_tokens": 5, "output_tokens": 12},
            ),
            _cc(
                "u2",
                "a3",
                "user",
                [_res("t2", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])],
            ),
            _cc("u3", "u2", "user", [{**_res("t1", "boom"), "is_error": True}]),
            {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
            {"type": "system", "uuid": "s1", "parentUuid": "u3", "content": "hook ran"},
            _cc("u4", "s1", "user", "thanks"),
        ],
    )
    (s,) = load(path)
    assert s.title == "Listing files" and s.key == "sess"
    roles = [m.role for m in s.messages]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.USER]
    assistant = s.messages[1]
    assert [p.kind for p in assistant.parts] == ["text", "tool_call", "tool_call"]
    assert assistant.tool_calls[1].arguments == '{"file_path":"x"}'
    (usage,) = s.usages
    assert usage.message_index == 1 and usage.raw["output_tokens"] == 12
    assert usage.protocol == "anthropic" and usage.model == "claude-x"
    listed = s.messages[2].tool_result
    assert listed is not None and listed.text == "a\nb" and isinstance(listed.content, tuple)
    failed = s.messages[3].tool_result
    assert failed is not None and failed.is_error and failed.content == "boom"
    assert s.meta["skipped_entries"] == {"summary": 1, "file-history-snapshot": 1, "system": 1}


def test_claude_code_follows_the_live_branch_after_a_rewind(tmp_path: Path) -> None:
    # covers: LED-1
    path = _jsonl(
        tmp_path / "s.jsonl",
        [
            _cc("u1", None, "user", "first"),
            _cc("a1", "u1", "assistant", [{"type": "text", "text": "one"}]),
            _cc("u2", "a1", "user", "abandoned question"),
            _cc("a2", "u2", "assistant", [{"type": "text", "text": "abandoned answer"}]),
            _cc("u3", "a1", "user", "rewound question"),  # the user rewound to after a1
            _cc("a3", "u3", "assistant", [{"type": "text", "text": "kept answer"}]),
            # A compaction starts a new root; the old segment stays in the import.
            {"type": "system", "subtype": "compact_boundary", "uuid": "c1", "parentUuid": None},
            _cc("u4", "c1", "user", "summary of the above", isCompactSummary=True),
            _cc("a4", "u4", "assistant", [{"type": "text", "text": "continuing"}]),
        ],
    )
    (s,) = load(path)
    texts = [m.text for m in s.messages]
    assert texts == [
        "first",
        "one",
        "rewound question",
        "kept answer",
        "summary of the above",
        "continuing",
    ]


def test_claude_code_sidechains_become_child_sessions(tmp_path: Path) -> None:
    # covers: LED-1
    prompt = "Create the components"
    path = _jsonl(
        tmp_path / "s.jsonl",
        [
            _cc("u1", None, "user", "go"),
            _cc("a1", "u1", "assistant", [_use("task1", "Task", prompt=prompt)]),
            _cc("x1", None, "user", prompt, sidechain=True),
            _cc("x2", "x1", "assistant", [_use("b1")], sidechain=True),
            _cc("x3", "x2", "user", [_res("b1", "done")], sidechain=True),
            _cc("x4", "x3", "assistant", [{"type": "text", "text": "made"}], sidechain=True),
            _cc("u2", "a1", "user", [_res("task1", "made")]),
        ],
    )
    main, child = load(path)
    assert [m.role for m in main.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert child.parent_key == main.key == "sess"
    assert child.meta["parent_call_id"] == "task1"
    assert child.messages[0].text == prompt
    assert open_calls(child.messages) == [] and open_calls(main.messages) == []


def test_claude_code_web_export(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "export.json",
        {
            "loglines": [
                {"type": "user", "message": {"role": "user", "content": "hi"}},
                {
                    "type": "assistant",
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "thinking", "thinking": "t"}, _use("c1")],
                    },
                },
                {"type": "user", "message": {"role": "user", "content": [_res("c1", "x")]}},
            ]
        },
    )
    assert detect_format(path) == "claude-code-web"
    (s,) = load(path)
    assert isinstance(s.messages[1].parts[0], Reasoning) and s.messages[2].text == "x"


# --- Codex ----------------------------------------------------------------------------------


def _item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "t", "type": "response_item", "payload": payload}


def _count(last_in: int, total_in: int) -> dict[str, Any]:
    usage = {"input_tokens": last_in, "output_tokens": 1}
    total = {"input_tokens": total_in, "output_tokens": 1}
    return {
        "type": "event_msg",
        "payload": {
            "type": "token_count",
            "info": {"last_token_usage": usage, "total_token_usage": total},
        },
    }


def test_codex_usage_goes_to_the_response_it_counts(tmp_path: Path) -> None:
    # covers: LED-1
    output = '{"output":"a\\n","metadata":{"exit_code":2,"duration_seconds":0.1}}'
    path = _jsonl(
        tmp_path / "rollout.jsonl",
        [
            {"type": "session_meta", "payload": {"id": "abc", "cwd": "/w", "cli_version": "0.58"}},
            _item(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "go"}],
                }
            ),
            {"type": "turn_context", "payload": {"model": "gpt-5"}},
            {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
            _count(100, 100),  # CLI 0.58: the count comes before the items it counts
            _item(
                {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "plan"}],
                    "content": None,
                    "encrypted_content": "ENC",
                }
            ),
            _item(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": '{"command":["ls"]}',
                    "call_id": "c1",
                }
            ),
            _item({"type": "function_call_output", "call_id": "c1", "output": output}),
            _item({"type": "ghost_snapshot", "ghost_commit": {"id": "g"}}),
            {"type": "turn_context", "payload": {"model": "gpt-5"}},
            _count(100, 100),  # the CLI repeats the same count after the tool ran
            _item(
                {
                    "type": "custom_tool_call",
                    "name": "apply_patch",
                    "input": "*** Begin",
                    "call_id": "c2",
                }
            ),
            _count(150, 250),  # later CLIs: the count after the items
            _item({"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"}),
            _item(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "finished"}],
                }
            ),
        ],
    )
    assert detect_format(path) == "codex"
    (s,) = load(path)
    assert s.key == "abc" and s.meta["cli_version"] == "0.58"
    roles = [m.role for m in s.messages]
    assert roles == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    reasoning = s.messages[1].parts[0]
    assert isinstance(reasoning, Reasoning) and reasoning.data == "ENC"
    assert reasoning.summary == ("plan",)
    result = s.messages[2].tool_result
    assert result is not None and result.content == output  # kept as the JSON string it is
    assert s.meta["exit_codes"] == {"c1": 2}
    custom = s.messages[3].tool_calls[0]
    assert (custom.call_type, custom.arguments) == ("custom", "*** Begin")
    assert [(u.message_index, u.raw["input_tokens"]) for u in s.usages] == [(1, 100), (3, 150)]
    assert all(u.protocol == "openai_responses" and u.model == "gpt-5" for u in s.usages)
    assert s.meta["skipped_items"]["token_count:repeat"] == 1
    assert s.meta["skipped_items"]["response_item:ghost_snapshot"] == 1


def test_codex_counts_without_a_response_are_kept_in_meta() -> None:
    # covers: LED-1
    (s,) = load(corpus_dir() / "codex" / "ccusage_codex_session-alpha.jsonl")
    assert s.messages == () and s.usages == ()
    assert [u["raw"]["input_tokens"] for u in s.meta["unattached_usage"]] == [1000, 2500]


# --- OpenHands ------------------------------------------------------------------------------


def _response(rid: str, text: str, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "id": rid,
        "model": "m",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": args},
                        }
                        for cid, name, args in calls
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }


def test_openhands_groups_one_response_and_counts_its_usage_once(tmp_path: Path) -> None:
    # covers: LED-1
    resp = _response(
        "r1",
        "Two commands.",
        [("t1", "execute_bash", '{"command": "a"}'), ("t2", "execute_bash", '{"command": "b"}')],
    )

    def tcm(cid: str) -> dict[str, Any]:
        return {
            "function_name": "execute_bash",
            "tool_call_id": cid,
            "model_response": resp,
            "total_calls_in_response": 2,
        }

    events = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "SYS", "tools": []}},
        {"id": 1, "source": "user", "action": "message", "args": {"content": "do it"}},
        {"id": 2, "source": "environment", "observation": "agent_state_changed", "content": ""},
        {
            "id": 3,
            "source": "agent",
            "action": "run",
            "args": {"command": "a", "thought": "x"},
            "tool_call_metadata": tcm("t1"),
        },
        {
            "id": 4,
            "source": "agent",
            "action": "run",
            "args": {"command": "b"},
            "tool_call_metadata": tcm("t2"),
        },
        {"id": 5, "source": "agent", "observation": "run", "cause": 4, "content": "B-out"},
        {"id": 6, "source": "agent", "observation": "error", "content": "bad call"},
        {"id": 7, "source": "agent", "observation": "run", "cause": 3, "content": "A-out"},
        {"id": 8, "source": "agent", "action": "message", "args": {"content": "done"}},
    ]
    path = _json(tmp_path / "events.json", events)
    assert detect_format(path) == "openhands"
    (s,) = load(path)
    roles = [m.role for m in s.messages]
    # The uncaused error is shown to the model as a user turn, after the step's results.
    assert roles == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]
    assistant = s.messages[2]
    assert assistant.parts[0] == Text("Two commands.")
    assert [c.arguments for c in assistant.tool_calls] == ['{"command": "a"}', '{"command": "b"}']
    (usage,) = s.usages
    assert usage.message_index == 2 and usage.protocol == "openai_chat"
    assert s.meta["skipped_events"] == {"observation:agent_state_changed": 1}
    assert s.meta["reordered_messages"] == 1


# --- SWE-agent and mini-swe-agent -----------------------------------------------------------


def test_swe_agent_text_actions_pair_by_position(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "task.traj",
        {
            "history": [
                {"role": "system", "content": "sys", "agent": "primary"},
                {"role": "user", "content": "fix it", "agent": "primary"},
                {
                    "role": "assistant",
                    "content": "look\n```\nls -a\n```",
                    "action": "ls -a\n",
                    "agent": "primary",
                },
                {"role": "user", "content": "a b\n(Open file: n/a)\nbash-$", "agent": "primary"},
                {
                    "role": "assistant",
                    "content": "done\n```\nsubmit\n```",
                    "action": "submit\n",
                    "agent": "primary",
                },
            ],
            "trajectory": [
                {"action": "ls -a\n", "observation": "a b"},
                {"action": "submit\n", "observation": "diff --git"},
            ],
            "info": {"exit_status": "submitted", "model_stats": {"api_calls": 2}},
        },
    )
    assert detect_format(path) == "swe-agent"
    (s,) = load(path)
    calls = [c for m in s.messages for c in m.tool_calls]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("pos-2", "bash", {"command": "ls -a\n"}),
        ("pos-4", "bash", {"command": "submit\n"}),
    ]
    results = [m.tool_result for m in s.messages if m.tool_result]
    assert [r.content for r in results] == ["a b\n(Open file: n/a)\nbash-$", "diff --git"]
    assert s.meta["final_result_from_trajectory"] is True
    assert s.meta["exit_status"] == "submitted"


def test_mini_swe_agent_exit_and_usage(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "run.traj.json",
        {
            "trajectory_format": "mini-swe-agent-1.1",
            "instance_id": "inst",
            "info": {"exit_status": "Submitted", "config": {"model": {"model_name": "ds"}}},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "task"},
                {
                    "role": "assistant",
                    "content": "",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                        }
                    ],
                    "extra": {"response": {"model": "ds-chat", "usage": {"prompt_tokens": 7}}},
                },
                {"role": "tool", "tool_call_id": "c1", "content": "<returncode>0</returncode>"},
                {"role": "exit", "content": "patch", "extra": {"exit_status": "Submitted"}},
            ],
        },
    )
    (s,) = load(path)
    assert s.key == "inst" and s.meta["model"] == "ds"
    assert s.meta["exit"] == {"content": "patch", "extra": {"exit_status": "Submitted"}}
    assistant = s.messages[2]
    assert assistant.parts[0] == Reasoning("think", provider="openai_chat")
    (usage,) = s.usages
    assert (usage.message_index, usage.protocol, usage.model) == (2, "openai_chat", "ds-chat")


def test_mini_swe_agent_v1_format_errors_stay_user_messages(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "old.traj.json",
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "no block here"},
            {"role": "user", "content": "Please always provide EXACTLY ONE action"},
            {"role": "assistant", "content": "ok\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\nx\n</output>"},
        ],
    )
    assert detect_format(path) == "mini-swe-agent"
    (s,) = load(path)
    assert [m.role for m in s.messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    assert s.messages[4].tool_calls[0].id == "pos-4"


# --- plain message lists --------------------------------------------------------------------


def test_openai_list_with_legacy_function_call(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "chat.json",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "sys"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "see"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "f", "arguments": "{}"},
                },
                {"role": "function", "name": "f", "content": "F-out"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "g", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "G-out"},
            ],
        },
    )
    assert detect_format(path) == "openai"
    (s,) = load(path)
    assert s.meta["model"] == "gpt-4o"
    image = s.messages[1].parts[1]
    assert isinstance(image, Media) and (image.mime, image.data) == ("image/png", "AAAA")
    assert [m.tool_result.call_id for m in s.messages if m.tool_result] == ["pos-2", "c1"]
    assert open_calls(s.messages) == []


def test_anthropic_request_with_system_and_cache_hints(tmp_path: Path) -> None:
    # covers: LED-1
    path = _json(
        tmp_path / "req.json",
        {
            "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [_use("t1")]},
                {"role": "user", "content": [_res("t1", "out"), {"type": "text", "text": "next"}]},
            ],
        },
    )
    assert detect_format(path) == "anthropic"
    (s,) = load(path)
    assert [m.role for m in s.messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
    ]
    first = s.messages[0].parts[0]
    assert isinstance(first, Text) and first.cache is not None


# --- detection and errors -------------------------------------------------------------------


def test_detection_is_by_content_not_name(tmp_path: Path) -> None:
    # covers: LED-1
    src = (
        corpus_dir()
        / "codex"
        / "rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    )
    renamed = tmp_path / "something.txt"
    shutil.copyfile(src, renamed)
    assert detect_format(renamed) == "codex"
    locomo = corpus_dir() / "locomo" / "locomo10_conv41.json"
    assert detect_format(locomo) == "locomo"


def test_locomo_sessions_keep_turn_ids() -> None:
    # covers: LED-1
    sessions = load(corpus_dir() / "locomo" / "locomo10_conv41.json")
    first = sessions[0]
    assert first.key == "locomo10_conv41:session_1" and first.meta["dia_ids"][0] == "D1:1"
    assert len(first.meta["dia_ids"]) == len(first.messages)
    assert {m.name for m in first.messages} == {"John", "Maria"}
    assert all(m.role is Role.USER for m in first.messages if m.name == "John")  # speaker_a


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"", "empty"), (b'{"hello": "world"}', "no known transcript format"), (b"nope", "empty")],
)
def test_unknown_files_say_what_is_supported(tmp_path: Path, content: bytes, needle: str) -> None:
    # covers: LED-1
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(ImportFormatError, match=needle) as info:
        detect_format(path)
    assert "claude-code" in str(info.value) or "Claude Code" in str(info.value)


def test_unknown_format_name_is_a_user_error(tmp_path: Path) -> None:
    # covers: LED-1
    with pytest.raises(UserError, match="unknown import format"):
        load(tmp_path / "x.json", "whatever")


def test_missing_required_field_names_it(tmp_path: Path) -> None:
    # covers: LED-1
    path = _jsonl(
        tmp_path / "s.jsonl",
        [_cc("u1", None, "user", "hi"), {"type": "assistant", "uuid": "a1", "message": "oops"}],
    )
    with pytest.raises(ImportFormatError) as info:
        load(path)
    assert (info.value.line, info.value.field) == (2, "message")


def test_big_sessions_import_whole(tmp_path: Path) -> None:
    # covers: LED-1
    # 40k records (~9 MB) import whole. (Speed is a benchmark's business, not a test's: a
    # quadratic step here would show as minutes in `comal bench ledger`, not as a flaky limit.)
    records: list[dict[str, Any]] = [_cc("u0", None, "user", "start")]
    parent = "u0"
    for i in range(10_000):
        call = f"t{i}"
        records.append(
            _cc(f"a{i}", parent, "assistant", [{"type": "text", "text": "x" * 100}], msg_id=f"m{i}")
        )
        records.append(_cc(f"b{i}", f"a{i}", "assistant", [_use(call)], msg_id=f"m{i}"))
        records.append(_cc(f"r{i}", f"b{i}", "user", [_res(call, "y" * 500)]))
        parent = f"r{i}"
    path = _jsonl(tmp_path / "big.jsonl", records)
    (s,) = load(path)
    assert len(s.messages) == 20_001 and len(s.usages) == 10_000
    assert s.messages[-1].tool_result is not None and s.messages[-1].tool_result.call_id == "t9999"


def test_call_ids_are_unique_per_session() -> None:
    # covers: LED-1
    for folder in ("swe-agent", "mini-swe-agent", "openhands", "claude-code", "codex"):
        for path in sorted((corpus_dir() / folder).glob("*")):
            for s in load(path):
                ids = [c.id for m in s.messages for c in m.tool_calls]
                assert len(ids) == len(set(ids)), (path.name, s.key)
                assert all(isinstance(c, ToolCall) for m in s.messages for c in m.tool_calls)


# --- OpenHands 0.x resolver output ----------------------------------------------------------

_INSTRUCTION = (
    "Please fix the following issue for the repository in /workspace.\n"
    "# Title\nparse() drops the last field\n"
)
_AUTO_REPLY = "Please continue working on the task on whatever approach you think is suitable."
# Observation contents with what a terminal leaves in them: CRLF, a trailing prompt, non-ASCII.
_GREP = "src/p.py:3:def parse(s):\r\nsrc/p.py:4:    return s.split(',')[:-1]  \r\n"
_EDIT = (
    "The file /workspace/src/p.py has been edited. Here's the result of running `cat -n`:\n"
    "     4\t    return s.split(',')\n"
)
_PYTEST = (
    "F.\r\n== 1 failed, 1 passed in 0.02s ==\r\n\x1b[0m café ✓\r\n"
    "[Python Interpreter: /usr/bin/python]\nroot@ab12:/workspace # "
)


def _resolver_line(history: list[Any], **extra: Any) -> dict[str, Any]:
    """A ResolverOutput as OpenHands 0.x wrote it: history from dataclasses.asdict(event)."""
    return {
        "issue": {
            "owner": "acme",
            "repo": "csvkit",
            "number": 42,
            "title": "parse() drops the last field\nmore",
            "body": "It drops it.",
            "thread_comments": None,
            "closing_issues": None,
            "review_comments": None,
        },
        "issue_type": "issue",
        "instruction": _INSTRUCTION,
        "base_commit": "9f1c2e7",
        "git_patch": (
            "diff --git a/src/p.py b/src/p.py\n"
            "-    return s.split(',')[:-1]\n+    return s.split(',')\n"
        ),
        "history": history,
        "metrics": {"accumulated_cost": 0.0421, "costs": [0.011, 0.0131, 0.018]},
        "success": True,
        "comment_success": None,
        "result_explanation": "The parser keeps the last field now.",
        "error": None,
        **extra,
    }


def _run(command: str, thought: str = "") -> dict[str, Any]:
    return {
        "command": command,
        "is_input": False,
        "thought": thought,
        "blocking": False,
        "is_static": False,
        "cwd": None,
        "hidden": False,
        "action": "run",
        "confirmation_state": "confirmed",
        "security_risk": None,
    }


def _ran(command: str, content: str, exit_code: int = 0) -> dict[str, Any]:
    return {
        "content": content,
        "command": command,
        "observation": "run",
        "metadata": {"exit_code": exit_code, "pid": -1, "working_dir": "/workspace"},
        "hidden": False,
    }


def _message(content: str, wait: bool) -> dict[str, Any]:
    return {
        "content": content,
        "file_urls": None,
        "image_urls": None,
        "wait_for_response": wait,
        "action": "message",
        "security_risk": None,
    }


def _resolver_history() -> list[Any]:
    return [
        {
            "content": "You are OpenHands agent.",
            "tools": [{"type": "function", "function": {"name": "execute_bash"}}],
            "openhands_version": "0.39.0",
            "agent_class": "CodeActAgent",
            "action": "system",
        },
        _message(_INSTRUCTION, wait=False),
        {
            "query": _INSTRUCTION,
            "thought": "",
            "recall_type": "workspace_context",
            "action": "recall",
        },
        {
            "content": "Added workspace context",
            "recall_type": "workspace_context",
            "observation": "recall",
        },
        _run("grep -rn 'def parse' src/", "Let me find the parser first."),
        _ran("grep -rn 'def parse' src/", _GREP),
        {
            "path": "/workspace/src/p.py",
            "command": "str_replace",
            "file_text": None,
            "old_str": "    return s.split(',')[:-1]",
            "new_str": "    return s.split(',')",
            "insert_line": None,
            "content": "",
            "start": 1,
            "end": -1,
            "thought": "",
            "action": "edit",
            "security_risk": None,
            "impl_source": "oh_aci",
        },
        {
            "content": _EDIT,
            "path": "/workspace/src/p.py",
            "prev_exist": True,
            "old_content": "a",
            "new_content": "b",
            "observation": "edit",
            "impl_source": "oh_aci",
            "diff": None,
        },
        _run("pytest -q tests/test_p.py", "Now the tests."),
        {"content": _PYTEST, "observation": "error", "error_id": ""},
        _message("One test still fails. Should I update it?", wait=True),
        _message(_AUTO_REPLY, wait=False),
        {
            "final_thought": "Fixed parse() and its test.",
            "task_completed": "true",
            "outputs": {},
            "thought": "All green.",
            "action": "finish",
        },
    ]


def test_openhands_resolver_output_imports_one_session_per_issue(tmp_path: Path) -> None:
    # covers: LED-1
    history = _resolver_history()
    old = [  # an openhands-resolver 0.1 line: IPython cells, no system message
        _message("Add a LICENSE", wait=False) | {"images_urls": None},
        {
            "code": "print(open('LICENSE').read())",
            "thought": "Check what is there.",
            "action": "run_ipython",
            "is_confirmed": "confirmed",
            "security_risk": None,
            "kernel_init_code": "from agentskills import *",
        },
        {
            "content": "MIT License\r\n",
            "code": "print(open('LICENSE').read())",
            "observation": "run_ipython",
        },
        {"outputs": {}, "thought": "It is already licensed.", "action": "finish"},
    ]
    path = _jsonl(
        tmp_path / "output.jsonl",
        [
            _resolver_line(history),
            _resolver_line(old, instruction="Add a LICENSE", success_explanation="done")
            | {"issue": {"owner": "acme", "repo": "csvkit", "number": 7, "title": "License"}},
        ],
    )
    assert detect_format(path) == "openhands-resolver"
    first, second = load(path)
    assert (first.format, first.key, first.title) == (
        "openhands-resolver",
        "acme/csvkit#42",
        "parse() drops the last field",
    )
    roles = [m.role for m in first.messages]
    assert roles == [
        Role.SYSTEM,
        Role.USER,  # the instruction, once
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,  # the question the agent waited on
        Role.USER,  # the resolver's automatic reply
        Role.ASSISTANT,  # finish
    ]
    assert first.messages[1].parts == (Text(_INSTRUCTION),)
    assert first.messages[2].parts == (
        Text("Let me find the parser first."),
        ToolCall(
            "oh0-1-4",
            "run",
            json.dumps(
                {"command": "grep -rn 'def parse' src/", "is_input": False}, separators=(",", ":")
            ),
        ),
    )
    edit = first.messages[4].tool_calls[0]
    assert (edit.id, edit.name) == ("oh0-1-6", "edit") and first.messages[4].parts[0] is edit
    assert json.loads(edit.arguments)["new_str"] == "    return s.split(',')"
    assert "impl_source" not in json.loads(edit.arguments)
    # Every pair whole, each result the observation that followed its action, byte for byte.
    got = [(p.call.id, p.result) for p in pairs(first.messages)]
    assert [(cid, r.content if r else None, r.is_error if r else None) for cid, r in got] == [
        ("oh0-1-4", _GREP, False),
        ("oh0-1-6", _EDIT, False),
        ("oh0-1-8", _PYTEST, True),
    ]
    assert first.messages[-1].parts == (Text("All green.\n\nFixed parse() and its test."),)
    assert first.messages[-2].parts == (Text(_AUTO_REPLY),)
    assert first.meta["git_patch"].startswith("diff --git") and first.meta["success"] is True
    assert first.meta["metrics"] == {"accumulated_cost": 0.0421, "costs": [0.011, 0.0131, 0.018]}
    assert first.meta["issue"]["number"] == 42 and first.meta["base_commit"] == "9f1c2e7"
    assert first.meta["result_explanation"] == "The parser keeps the last field now."
    assert first.meta["instruction_in_history"] is True and first.meta["task_completed"] == "true"
    assert first.meta["skipped_events"] == {"action:recall": 1, "observation:recall": 1}
    assert first.meta["tools"][0]["function"]["name"] == "execute_bash"
    assert first.meta["closed_calls"] == 0 and "open_calls" not in first.meta
    assert first.warnings == ()

    assert second.key == "acme/csvkit#7" and second.meta["success_explanation"] == "done"
    assert [m.role for m in second.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    cell = second.messages[1].tool_calls[0]
    assert (cell.id, cell.name) == ("oh0-2-1", "run_ipython")
    assert cell.arguments == '{"code":"print(open(\'LICENSE\').read())"}'
    assert second.messages[2].tool_result == ToolResult("oh0-2-1", "MIT License\r\n")
    ids = [c.id for s in (first, second) for m in s.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids))
    # Stable: the same file gives the same ids and messages.
    assert [s.messages for s in load(path)] == [first.messages, second.messages]


def test_openhands_resolver_pairs_and_a_crashed_run(tmp_path: Path) -> None:
    # covers: LED-1
    def ev(kind: str, **fields: Any) -> dict[str, Any]:
        # event_to_dict, as compatibility_for_eval_history_pairs() wrote each half of a pair
        if kind.startswith("obs:"):
            content = fields.pop("content", "")
            return {
                "id": 3,
                "source": "agent",
                "observation": kind[4:],
                "content": content,
                "extras": fields,
                "cause": 2,
            }
        return {"id": 2, "source": fields.pop("source", "agent"), "action": kind, "args": fields}

    pairs_history = [
        [ev("message", content="Fix it", wait_for_response=False, source="user"), ev("obs:null")],
        [
            ev("run", command="make test", thought="Run the tests.", keep_prompt=True),
            ev("obs:run", content="ok\n", command_id=-1, exit_code=0),
        ],
        [ev("finish", outputs={}, thought="Done."), ev("obs:null")],
    ]
    crashed: list[Any] = []
    path = _jsonl(
        tmp_path / "output.jsonl",
        [
            _resolver_line(pairs_history, instruction="Fix it"),
            _resolver_line(crashed, error="Agent failed to run or crashed", success=False),
        ],
    )
    paired, empty = load(path)
    assert [m.role for m in paired.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert paired.messages[1].parts == (
        Text("Run the tests."),
        ToolCall("oh0-1-1-0", "run", '{"command":"make test"}'),
    )
    assert paired.messages[2].tool_result == ToolResult("oh0-1-1-0", "ok\n")
    assert paired.meta["skipped_events"] == {"observation:null": 2}
    # No history: the instruction alone, and the run's error in meta.
    assert empty.messages == (Message.user(_INSTRUCTION),)
    assert empty.key == "acme/csvkit#42@2"  # the same issue twice in one file stays two sessions
    assert empty.meta["error"] == "Agent failed to run or crashed"
    assert empty.meta["instruction_in_history"] is False


def test_openhands_resolver_dangling_action_strict_and_lenient(tmp_path: Path) -> None:
    # covers: LED-1
    history = _resolver_history()
    del history[7]  # the edit's observation: the next run action follows the edit directly
    path = _jsonl(
        tmp_path / "output.jsonl", [_resolver_line(_resolver_history()), _resolver_line(history)]
    )
    with pytest.raises(ImportFormatError) as caught:
        load(path)
    err = caught.value
    assert (err.line, err.field) == (2, "history[6]")
    assert "'edit' action" in str(err) and "--lenient" in str(err) and "lenient=" not in str(err)

    _, repaired = load(path, lenient=True)
    (closed,) = [p for p in pairs(repaired.messages) if p.call.id == "oh0-2-6"]
    assert closed.result == ToolResult("oh0-2-6", INTERRUPTED, is_error=True)
    assert repaired.meta["closed_calls"] == 1 and open_calls(repaired.messages) == []
    assert any(":2" in w and "history[6]" in w for w in repaired.warnings)
    # The next action still gets its own observation.
    after = next(p for p in pairs(repaired.messages) if p.call.id == "oh0-2-7")
    assert after.result == ToolResult("oh0-2-7", _PYTEST, is_error=True)

    # An action the history ends on: strict keeps it open (the ledger's paused state), lenient
    # closes it, as every importer does.
    tail = _resolver_history()[:9]
    path = _jsonl(tmp_path / "tail.jsonl", [_resolver_line(tail)])
    (strict,) = load(path)
    assert strict.meta["open_calls"] == ["oh0-1-8"] and [
        c.id for c in open_calls(strict.messages)
    ] == ["oh0-1-8"]
    (lenient,) = load(path, lenient=True)
    assert lenient.messages[-1].tool_result == ToolResult("oh0-1-8", INTERRUPTED, is_error=True)


def test_openhands_resolver_output_is_detected_from_its_head(tmp_path: Path) -> None:
    # covers: LED-1
    # A git_patch longer than the head detection reads: the fields before it still say what it is.
    line = _resolver_line(_resolver_history(), git_patch="+" * (1 << 21))
    path = _jsonl(tmp_path / "output.jsonl", [line])
    assert detect_format(path) == "openhands-resolver"
    (session,) = load(path)
    assert len(session.meta["git_patch"]) == 1 << 21
    # OpenHands evaluation output names an instance, never an issue: still 'openhands'.
    evaluation = _jsonl(
        tmp_path / "eval.jsonl", [{"instance_id": "a__b-1", "instruction": "x", "history": []}]
    )
    assert detect_format(evaluation) == "openhands"
    # A damaged history item names its line and field.
    bad = _resolver_history()
    bad[5] = {"observation": "run", "content": None}
    path = _jsonl(tmp_path / "bad.jsonl", [_resolver_line(bad)])
    with pytest.raises(ImportFormatError) as caught:
        load(path)
    assert (caught.value.line, caught.value.field) == (1, "history[5].content")


def test_openhands_arguments_fall_back_to_the_action_args(tmp_path: Path) -> None:
    # covers: LED-1
    events = [
        {
            "id": 1,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls", "is_input": False, "thought": "look", "blocking": False},
            "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"},
        },
        {"id": 2, "source": "agent", "observation": "run", "cause": 1, "content": "a"},
    ]
    (s,) = load(_json(tmp_path / "events.json", events))
    assert s.messages[0].parts[0] == Text("look")
    assert s.messages[0].tool_calls[0].arguments == '{"command":"ls","is_input":false}'
    assert s.meta["arguments_from_args"] == 1 and s.usages == ()


def test_a_forced_format_that_does_not_fit_says_what_the_file_looks_like() -> None:
    # covers: LED-1
    path = corpus_dir() / "codex" / "ccusage_codex_session-alpha.jsonl"
    with pytest.raises(ImportFormatError, match="looks like 'codex', not 'swe-agent'"):
        load(path, "swe-agent")
