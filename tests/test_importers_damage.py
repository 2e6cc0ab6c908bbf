"""Damaged copies of corpus files (built in tmp_path; the corpus is never touched).

Each damage kind real users have: a torn last record, runs of NUL bytes, two records joined on
one line, a tool call whose result never came, a field of the wrong type. Strict mode raises
ImportFormatError naming file, line and field; lenient mode keeps what it can and says what it
skipped or closed, in warnings and in meta counts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comal.errors import ImportFormatError
from comal.importers import INTERRUPTED, ImportedSession, load
from comal.messages import Message, open_calls, sha256_hex
from conftest import corpus_dir

Record = dict[str, Any]


@dataclass(frozen=True)
class JsonlCase:
    rel: str
    is_result: Callable[[Record], bool]  # the record holding a tool result
    break_type: Callable[[Record], str]  # gives one field a wrong type, returns its name
    is_call: Callable[[Record], bool]


def _claude_result(r: Record) -> bool:
    content = (r.get("message") or {}).get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _claude_call(r: Record) -> bool:
    content = (r.get("message") or {}).get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_use" for b in content)


def _claude_break(r: Record) -> str:
    r["message"]["content"] = 42
    return "message.content"


def _codex_break(r: Record) -> str:
    r["payload"]["output"] = 123
    return "payload.output"


JSONL = {
    "claude-code": JsonlCase(
        "claude-code/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        _claude_result,
        _claude_break,
        _claude_call,
    ),
    "codex": JsonlCase(
        "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
        lambda r: r["payload"].get("type") == "function_call_output",
        _codex_break,
        lambda r: r["payload"].get("type") == "function_call",
    ),
}

# Whole-file JSON: (corpus file, path of the record list, predicate for a tool result record)
DOCS = {
    "swe-agent": ("swe-agent/function_calling_simple.traj", ("history",), "role", "tool"),
    "mini-swe-agent": (
        "mini-swe-agent/deepseek-chat-rerun__pydicom__pydicom-1256.traj.json",
        ("messages",),
        "role",
        "tool",
    ),
    "openhands": ("openhands/runtime_trajs_wrong_initial_state.json", (), "observation", "run"),
}


def _copy(tmp_path: Path, rel: str) -> Path:
    dest = tmp_path / Path(rel).name
    shutil.copyfile(corpus_dir() / rel, dest)
    return dest


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def _messages(sessions: list[ImportedSession]) -> list[tuple[Message, ...]]:
    return [s.messages for s in sessions]


def _total(sessions: list[ImportedSession], key: str) -> int:
    return sum(int(s.meta[key]) for s in sessions)


def _warnings(sessions: list[ImportedSession]) -> list[str]:
    return [w for s in sessions for w in s.warnings]


def _strict_error(path: Path) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as info:
        load(path)
    err = info.value
    assert err.path == str(path)
    return err


def _first(lines: list[bytes], pred: Callable[[Record], bool], start: int = 0) -> int:
    return next(i for i in range(start, len(lines)) if pred(json.loads(lines[i])))


# --- JSON Lines -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(JSONL))
def test_torn_last_line(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path = _copy(tmp_path, JSONL[fmt].rel)
    lines = _lines(path)
    whole = _write(tmp_path / "whole.jsonl", lines[:-1])
    _write(path, [*lines[:-1], lines[-1][: len(lines[-1]) // 2]])
    err = _strict_error(path)
    assert err.line == len(lines) and "torn" in str(err) and "--lenient" in str(err)
    sessions = load(path, lenient=True)
    assert _messages(sessions) == _messages(load(whole, fmt))
    (warning,) = _warnings(sessions)
    assert warning.startswith(f"{path}:{len(lines)}") and "torn" in warning
    assert _total(sessions, "skipped_records") == 1


@pytest.mark.parametrize("fmt", sorted(JSONL))
@pytest.mark.parametrize("where", ["own-line", "before-record", "end-of-file"])
def test_nul_runs(tmp_path: Path, fmt: str, where: str) -> None:
    # covers: LED-1
    path = _copy(tmp_path, JSONL[fmt].rel)
    original = load(path)
    lines = _lines(path)
    nuls = b"\0" * 4096
    if where == "own-line":
        lines.insert(3, nuls + b"\n")
        bad = 4
    elif where == "before-record":
        lines[3] = nuls + lines[3]
        bad = 4
    else:
        lines.append(nuls)
        bad = len(lines)
    _write(path, lines)
    err = _strict_error(path)
    assert err.line == bad and "NUL" in str(err)
    sessions = load(path, lenient=True)
    assert _messages(sessions) == _messages(original)
    (warning,) = _warnings(sessions)
    assert warning.startswith(f"{path}:{bad}") and "NUL" in warning
    # A record that was only preceded by NULs is kept; a line of NULs alone is skipped.
    assert _total(sessions, "skipped_records") == (0 if where == "before-record" else 1)


@pytest.mark.parametrize("fmt", sorted(JSONL))
def test_two_records_joined_on_one_line(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path = _copy(tmp_path, JSONL[fmt].rel)
    original = load(path)
    lines = _lines(path)
    _write(path, [*lines[:5], lines[5].rstrip(b"\n") + lines[6], *lines[7:]])
    err = _strict_error(path)
    assert err.line == 6 and "two JSON records" in str(err)
    sessions = load(path, lenient=True)
    assert _messages(sessions) == _messages(original)
    (warning,) = _warnings(sessions)
    assert warning.startswith(f"{path}:6")
    assert _total(sessions, "skipped_records") == 0


@pytest.mark.parametrize("fmt", sorted(JSONL))
def test_field_of_the_wrong_type(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    case = JSONL[fmt]
    path = _copy(tmp_path, case.rel)
    lines = _lines(path)
    i = _first(lines, case.is_result)
    record = json.loads(lines[i])
    field = case.break_type(record)
    lines[i] = json.dumps(record).encode() + b"\n"
    _write(path, lines)
    err = _strict_error(path)
    assert (err.line, err.field) == (i + 1, field)
    sessions = load(path, lenient=True)
    warnings = _warnings(sessions)
    assert any(w.startswith(f"{path}:{i + 1} ({field}): skipped") for w in warnings)
    # The skipped record held a result, so its call is closed, explicitly.
    assert _total(sessions, "skipped_records") == 1 and _total(sessions, "closed_calls") == 1
    assert any("closed tool call" in w for w in warnings)
    assert all(open_calls(s.messages) == [] for s in sessions)


@pytest.mark.parametrize("fmt", sorted(JSONL))
def test_result_that_never_came(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    case = JSONL[fmt]
    path = _copy(tmp_path, case.rel)
    original = load(path)
    lines = _lines(path)
    i = _first(lines, case.is_result)
    del lines[i]
    _write(path, lines)
    err = _strict_error(path)
    assert "has no result but the transcript goes on" in str(err) and err.line is not None
    (session,) = load(path, lenient=True)
    assert session.meta["closed_calls"] == 1 and open_calls(session.messages) == []
    closed = [m for m in session.messages if m.tool_result and m.tool_result.content == INTERRUPTED]
    assert len(closed) == 1 and closed[0].tool_result is not None
    assert closed[0].tool_result.is_error
    # Everything else is as before: one result replaced by the explicit marker.
    assert len(session.messages) == len(original[0].messages)


@pytest.mark.parametrize("fmt", sorted(JSONL))
def test_transcript_ending_with_an_open_call(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    case = JSONL[fmt]
    path = _copy(tmp_path, case.rel)
    lines = _lines(path)
    last_call = max(i for i, line in enumerate(lines) if case.is_call(json.loads(line)))
    _write(path, lines[: last_call + 1])
    (strict,) = load(path)  # a paused session is not damage: strict keeps the call open
    (call,) = open_calls(strict.messages)
    assert strict.meta["open_calls"] == [call.id] and strict.warnings == ()
    (lenient,) = load(path, lenient=True)
    assert lenient.messages[: len(strict.messages)] == strict.messages
    result = lenient.messages[-1].tool_result
    assert result is not None and (result.call_id, result.content) == (call.id, INTERRUPTED)
    assert lenient.meta["closed_calls"] == 1
    (warning,) = lenient.warnings
    assert warning.startswith(f"{path}:{last_call + 1}") and call.id in warning


def test_openhands_eval_line_damage_names_the_event(tmp_path: Path) -> None:
    # covers: LED-1
    path = _copy(tmp_path, "openhands/multi_swe_bench_example_output.jsonl")
    lines = _lines(path)
    instance = json.loads(lines[1])
    history = instance["history"]
    j = next(k for k, e in enumerate(history) if e.get("observation") == "run")
    history[j]["content"] = 5
    lines[1] = json.dumps(instance).encode() + b"\n"
    lines[2] = lines[2][:1000]  # and the last instance is torn
    _write(path, lines)
    err = _strict_error(path)
    assert (err.line, err.field) == (2, f"history[{j}].content")
    sessions = load(path, lenient=True)
    assert len(sessions) == 2  # the torn instance is gone, and said so
    warnings = _warnings(sessions)
    assert any(w.startswith(f"{path}:3") and "torn" in w for w in warnings)
    # The second session holds its own skipped event (and the call it answered, closed), its
    # final `finish` call closed, and the torn third line handed over after it.
    assert sessions[1].meta["skipped_records"] == 2 and sessions[1].meta["closed_calls"] == 2
    assert sessions[1].warnings[-1].startswith(f"{path}:3")


# --- whole-file JSON ------------------------------------------------------------------------


def _doc(tmp_path: Path, fmt: str) -> tuple[Path, Any, list[Any], tuple[str, ...]]:
    rel, base, _, _ = DOCS[fmt]
    path = _copy(tmp_path, rel)
    data = json.loads(path.read_text(encoding="utf-8"))
    seq = data
    for k in base:
        seq = seq[k]
    return path, data, seq, base


def _is_result(fmt: str, rec: Record) -> bool:
    _, _, key, value = DOCS[fmt]
    return bool(rec.get(key) == value)


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


@pytest.mark.parametrize("fmt", sorted(DOCS))
def test_doc_torn(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path, _, _, _ = _doc(tmp_path, fmt)
    raw = path.read_bytes()
    expected = {
        sha256_hex(m.tool_result.text) for s in load(path) for m in s.messages if m.tool_result
    }
    path.write_bytes(raw[: len(raw) * 6 // 10])
    err = _strict_error(path)
    assert "torn" in str(err) and err.line == raw[: len(raw) * 6 // 10].count(b"\n") + 1
    (session,) = load(path, lenient=True)
    assert any("torn" in w for w in session.warnings)
    kept = [m.tool_result for m in session.messages if m.tool_result]
    # Only whole outputs are kept: a result cut by the tear is dropped (its call closed as
    # interrupted), never shortened.
    assert all(sha256_hex(r.text) in expected for r in kept if r.content != INTERRUPTED)
    assert len(kept) > 0


@pytest.mark.parametrize("fmt", sorted(DOCS))
def test_doc_nul_padding(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path, _, _, _ = _doc(tmp_path, fmt)
    original = load(path, lenient=True)
    raw = path.read_bytes()
    path.write_bytes(raw + b"\0" * 8192)
    err = _strict_error(path)
    assert "NUL" in str(err) and err.line == raw.count(b"\n") + 1
    sessions = load(path, lenient=True)
    assert _messages(sessions) == _messages(original)
    assert [w for w in _warnings(sessions) if w not in _warnings(original)] == [
        f"{path}:{err.line}: 8192 NUL bytes (left by a crash); removed them"
    ]


@pytest.mark.parametrize("fmt", sorted(DOCS))
def test_doc_two_documents_joined(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path, _, _, _ = _doc(tmp_path, fmt)
    original = load(path, lenient=True)
    raw = path.read_bytes()
    path.write_bytes(raw.rstrip() + raw)
    err = _strict_error(path)
    assert "second JSON document" in str(err) and err.line == raw.rstrip().count(b"\n") + 1
    sessions = load(path, lenient=True)
    assert _messages(sessions) == _messages(original) * 2
    assert len({s.key for s in sessions}) == 2


@pytest.mark.parametrize("fmt", sorted(DOCS))
def test_doc_field_of_the_wrong_type(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path, data, seq, base = _doc(tmp_path, fmt)
    i = next(k for k, rec in enumerate(seq) if _is_result(fmt, rec))
    seq[i]["content"] = {"not": "text"}
    closed_before = load(path, lenient=True)[0].meta["closed_calls"]
    _dump(path, data)
    err = _strict_error(path)
    prefix = ".".join(base) + f"[{i}]" if base else f"[{i}]"
    assert err.field == f"{prefix}.content"
    # The line is where that field is written.
    assert err.line is not None
    assert '"content": {' in path.read_text(encoding="utf-8").splitlines()[err.line - 1]
    (session,) = load(path, lenient=True)
    # The record is skipped, and the call it answered is closed, explicitly.
    assert session.meta["skipped_records"] == 1
    assert session.meta["closed_calls"] == closed_before + 1
    assert any(f":{err.line} ({err.field}): skipped" in w for w in session.warnings)
    assert open_calls(session.messages) == []


@pytest.mark.parametrize("fmt", sorted(DOCS))
def test_doc_result_that_never_came(tmp_path: Path, fmt: str) -> None:
    # covers: LED-1
    path, data, seq, _ = _doc(tmp_path, fmt)
    i = next(k for k, rec in enumerate(seq) if _is_result(fmt, rec))
    del seq[i]
    _dump(path, data)
    err = _strict_error(path)
    assert "has no result" in str(err) and err.line is not None
    (session,) = load(path, lenient=True)
    assert session.meta["closed_calls"] >= 1 and open_calls(session.messages) == []
    assert (
        sum(1 for w in session.warnings if "closed tool call" in w) == session.meta["closed_calls"]
    )


def test_unreadable_file_is_reported_in_both_modes(tmp_path: Path) -> None:
    # covers: LED-1
    path = tmp_path / "x.traj"
    path.write_bytes(b"\xff\xfe garbage")
    for lenient in (False, True):
        with pytest.raises(ImportFormatError):
            load(path, "swe-agent", lenient=lenient)


# --- any tear, anywhere -------------------------------------------------------------------

FUZZ = [
    "claude-code/ccviewer_1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
    "swe-agent/function_calling_simple.traj",
    "openhands/runtime_trajs_wrong_initial_state.json",
]


@pytest.mark.parametrize("rel", FUZZ)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(cut=st.floats(0.0, 1.0), nul_at=st.none() | st.floats(0.0, 1.0))
def test_any_tear_or_nul_run_is_reported_never_mangled(
    rel: str, cut: float, nul_at: float | None
) -> None:
    # covers: LED-1
    src = corpus_dir() / rel
    raw = src.read_bytes()
    outputs = {
        sha256_hex(m.tool_result.text) for s in load(src) for m in s.messages if m.tool_result
    }
    damaged = raw[: int(len(raw) * cut)]
    if nul_at is not None:
        k = int(len(damaged) * nul_at)
        damaged = damaged[:k] + b"\0" * 64 + damaged[k:]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / src.name
        path.write_bytes(damaged)
        fmt = "claude-code" if rel.startswith("claude-code/") else rel.split("/")[0]
        for lenient in (False, True):
            try:
                sessions = load(path, fmt, lenient=lenient)
            except ImportFormatError as err:
                assert err.path == str(path)
                continue
            for s in sessions:
                for m in s.messages:
                    r = m.tool_result
                    # A kept output is whole; anything cut is closed explicitly instead.
                    assert r is None or r.content == INTERRUPTED or sha256_hex(r.text) in outputs
                if not lenient:
                    assert s.warnings == ()
