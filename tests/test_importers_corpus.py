"""Every corpus file imports, strictly, with whole tool pairs and usage where the file has it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

import comal.importers as importers
from comal.importers import FORMATS, INTERRUPTED, ImportedSession, detect_format, load
from comal.messages import Role, group_messages, open_calls, orphan_results
from conftest import CORPUS, corpus_dir

FOLDER_FORMAT = {
    "claude-code": "claude-code",
    "claude-code-web-json": "claude-code-web",
    "codex": "codex",
    "locomo": "locomo",
    "mini-swe-agent": "mini-swe-agent",
    "openhands": "openhands",
    "swe-agent": "swe-agent",
}

# (sessions, messages, tool calls, tool results, usage records, calls left open at the end)
EXPECTED = {
    "claude-code-web-json/simonw_sample_session.json": (1, 33, 12, 12, 0, 0),
    "claude-code/cclog_representative_messages.jsonl": (1, 11, 2, 2, 5, 0),
    "claude-code/cclog_todowrite_examples.jsonl": (1, 11, 3, 3, 6, 0),
    "claude-code/ccusage_project-alpha_chat.jsonl": (1, 0, 0, 0, 0, 0),
    "claude-code/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": (1, 21, 12, 12, 7, 0),
    "claude-code/ccviewer_agent-test-hash-123.jsonl": (1, 2, 0, 0, 1, 0),
    "claude-code/ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": (6, 345, 167, 167, 170, 0),
    "codex/ccusage_codex_session-alpha.jsonl": (1, 0, 0, 0, 0, 0),
    "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl": (
        1,
        80,
        39,
        39,
        39,
        0,
    ),
    "locomo/locomo10_conv41.json": (32, 663, 0, 0, 0, 0),
    "locomo/locomo10_conv43.json": (29, 680, 0, 0, 0, 0),
    "locomo/locomo10_conv50.json": (30, 568, 0, 0, 0, 0),
    "mini-swe-agent/deepseek-chat-dev__sqlfluff__sqlfluff-1733.traj.json": (1, 161, 80, 79, 80, 1),
    "mini-swe-agent/deepseek-chat-rerun__pydicom__pydicom-1256.traj.json": (1, 107, 53, 52, 53, 1),
    "mini-swe-agent/deepseek-chat__astropy__astropy-7746.traj.json": (1, 141, 70, 69, 70, 1),
    "mini-swe-agent/deepseek-chat__django__django-13265.traj.json": (1, 313, 156, 155, 156, 1),
    "mini-swe-agent/deepseek-chat__django__django-15388.traj.json": (1, 193, 96, 95, 96, 1),
    "mini-swe-agent/deepseek-lite__pyvista__pyvista-4315.traj.json": (1, 185, 92, 91, 92, 1),
    "mini-swe-agent/deepseek-reasoner__sqlfluff__sqlfluff-1733.traj.json": (
        1,
        290,
        144,
        144,
        144,
        0,
    ),
    "mini-swe-agent/example__astropy__astropy-12907.traj.json": (1, 129, 64, 63, 64, 1),
    "mini-swe-agent/test_data_github_issue.traj.json": (1, 22, 10, 10, 0, 0),
    "openhands/multi_swe_bench_example_output.jsonl": (3, 216, 105, 103, 105, 2),
    "openhands/runtime_trajs_basic_gui_mode.json": (1, 10, 4, 4, 4, 0),
    "openhands/runtime_trajs_basic_interactions.json": (1, 6, 1, 0, 1, 1),
    "openhands/runtime_trajs_wrong_initial_state.json": (1, 8, 4, 3, 4, 1),
    "swe-agent/ctf_crypto_BabyTimeCapsule.traj": (1, 20, 9, 9, 0, 0),
    "swe-agent/ctf_forensics_flash.traj": (1, 10, 4, 4, 0, 0),
    "swe-agent/ctf_pwn_warmup.traj": (1, 16, 7, 7, 0, 0),
    "swe-agent/ctf_web_i_got_id_demo.traj": (1, 44, 21, 21, 0, 0),
    "swe-agent/function_calling_simple.traj": (1, 12, 5, 5, 0, 0),
    "swe-agent/gpt4_swe-agent__test-repo-i1.traj": (1, 13, 5, 5, 0, 0),
    "swe-agent/human_thought_humanevalfix-python-0.traj": (1, 12, 5, 5, 0, 0),
    "swe-agent/marshmallow-1867__default_install_from_source.traj": (1, 30, 14, 14, 0, 0),
    "swe-agent/marshmallow-1867__function_calling.traj": (1, 24, 11, 11, 0, 0),
    "swe-agent/marshmallow-1867__function_calling_replace_from_source.traj": (
        1,
        28,
        13,
        13,
        0,
        0,
    ),
}


def _corpus_params() -> list[object]:
    if not CORPUS.is_dir():
        # One placeholder, so the test runs and corpus_dir() skips (or fails under CI=true).
        return [pytest.param(None, id="corpus-missing")]
    files = sorted(p for p in CORPUS.glob("*/*") if p.is_file())
    return [pytest.param(p, id=str(p.relative_to(CORPUS))) for p in files]


CORPUS_FILES = _corpus_params()


@cache
def _load(path: Path, lenient: bool = False) -> list[ImportedSession]:
    # Imports are pure values: each file is parsed once per mode for the whole module.
    return load(path, lenient=lenient)


def _counts(sessions: list[ImportedSession]) -> tuple[int, int, int, int, int, int]:
    msgs = [m for s in sessions for m in s.messages]
    return (
        len(sessions),
        len(msgs),
        sum(len(m.tool_calls) for m in msgs),
        sum(1 for m in msgs if m.role is Role.TOOL),
        sum(len(s.usages) for s in sessions),
        sum(len(open_calls(s.messages)) for s in sessions),
    )


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_file_imports_strictly(path: Path | None) -> None:
    # covers: LED-1
    root = corpus_dir()
    assert path is not None
    fmt = detect_format(path)
    assert fmt == FOLDER_FORMAT[path.parent.name]
    sessions = _load(path)
    assert sessions
    rel = str(path.relative_to(root))
    assert rel in EXPECTED, f"new corpus file {rel}: add its expected counts"
    assert _counts(sessions) == EXPECTED[rel]
    assert len({s.key for s in sessions}) == len(sessions)
    keys = {s.key for s in sessions}
    for s in sessions:
        assert s.format == fmt and s.source == str(path)
        assert s.warnings == ()
        assert s.meta["skipped_records"] == 0 and s.meta["closed_calls"] == 0
        json.dumps(s.meta)  # meta is JSON-able
        if s.parent_key is not None and len(sessions) > 1:
            assert s.parent_key in keys


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_corpus_pairs_are_whole(path: Path | None) -> None:
    # covers: LED-1
    corpus_dir()
    assert path is not None
    for s in _load(path):
        assert orphan_results(s.messages) == []
        groups = group_messages(s.messages)
        # Only the last step may end with an open call: the transcript stopped there.
        for g in groups[:-1]:
            assert g.open_calls == (), f"{s.key}: open call before the end at {g.start}"
        if groups and groups[-1].open_calls:
            assert list(s.meta["open_calls"]) == [c.id for c in groups[-1].open_calls]
        for u in s.usages:
            assert s.messages[u.message_index].role is Role.ASSISTANT
            assert u.protocol in ("anthropic", "openai_chat", "openai_responses")
        assert len({u.message_index for u in s.usages}) == len(s.usages)


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_lenient_on_a_sound_file_only_closes_the_final_open_calls(path: Path | None) -> None:
    # covers: LED-1
    corpus_dir()
    assert path is not None
    strict, lenient = _load(path), _load(path, lenient=True)
    assert [s.key for s in strict] == [s.key for s in lenient]
    for a, b in zip(strict, lenient, strict=True):
        extra = b.messages[len(a.messages) :]
        assert b.messages[: len(a.messages)] == a.messages
        assert len(extra) == len(a.meta.get("open_calls", ()))
        for m in extra:
            assert m.tool_result is not None and m.tool_result.content == INTERRUPTED
            assert m.tool_result.is_error
        assert b.meta["closed_calls"] == len(extra) == len(b.warnings)
        assert open_calls(b.messages) == []


def test_public_api_is_pinned() -> None:
    # covers: LED-1
    assert sorted(importers.__all__) == [
        "FORMATS",
        "INTERRUPTED",
        "ImportedSession",
        "StoredSession",
        "UsageRecord",
        "detect_format",
        "file_digest",
        "load",
        "store",
    ]
    assert set(FORMATS) == {
        "claude-code",
        "claude-code-web",
        "swe-agent",
        "mini-swe-agent",
        "codex",
        "openhands",
        "openhands-resolver",
        "openai",
        "anthropic",
        "locomo",
    }
