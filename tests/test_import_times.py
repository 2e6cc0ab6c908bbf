"""An imported session starts when its transcript did and is listed by a title (issue 19, item
12): sub-agent and LoCoMo sessions used to carry the import's own time, and most imports showed
their file's path where a title belongs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from comal.cli import app

runner = CliRunner()


def _imported(tmp_path: Path, name: str, body: str) -> dict[str, dict[str, Any]]:
    """Import one file; its sessions as ``comal sessions --all --json`` lists them, by title."""
    src = tmp_path / name
    src.write_text(body, encoding="utf-8")
    db = str(tmp_path / "l.db")
    done = runner.invoke(app, ["--ledger", db, "import", str(src), "--json"])
    assert done.exit_code == 0, done.output
    listed = runner.invoke(app, ["--ledger", db, "sessions", "--all", "--json"])
    return {s["title"]: s for s in json.loads(listed.stdout)}


def _claude(**fields: Any) -> str:
    return json.dumps({"isSidechain": False, "sessionId": "S", **fields})


def test_a_sub_agent_starts_when_its_own_records_do_and_is_named_by_its_task(
    tmp_path: Path,
) -> None:
    # covers: LED-1, LED-3
    task = {"description": "Write the parser", "prompt": "Write a parser for the log format"}
    lines = [
        _claude(
            type="user",
            uuid="u1",
            parentUuid=None,
            timestamp="2025-03-01T10:00:00Z",
            message={"role": "user", "content": "build the log tool"},
        ),
        _claude(
            type="assistant",
            uuid="a1",
            parentUuid="u1",
            timestamp="2025-03-01T10:00:05Z",
            message={
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Task", "input": task}],
            },
        ),
        _claude(
            type="user",
            uuid="s1",
            parentUuid=None,
            isSidechain=True,
            timestamp="2025-03-01T10:00:07Z",
            message={"role": "user", "content": task["prompt"]},
        ),
        _claude(
            type="assistant",
            uuid="s2",
            parentUuid="s1",
            isSidechain=True,
            timestamp="2025-03-01T10:09:00Z",
            message={"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        ),
        _claude(
            type="user",
            uuid="u2",
            parentUuid="a1",
            timestamp="2025-03-01T10:10:00Z",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ),
    ]
    sessions = _imported(tmp_path, "s.jsonl", "\n".join(lines) + "\n")
    main, sub = sessions["build the log tool"], sessions["sub-agent: Write the parser"]
    assert main["started"] == "2025-03-01T10:00:00.000000+00:00"
    assert sub["started"] == "2025-03-01T10:00:07.000000+00:00"
    assert sub["parent"] == main["session"]


def test_locomo_sessions_start_on_their_dialogue_dates(tmp_path: Path) -> None:
    # covers: LED-1
    turn = {"speaker": "Ana", "text": "hi", "dia_id": "D1:1"}
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1": [turn],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_2": [turn | {"dia_id": "D2:1"}],
        "session_2_date_time": "12:24 am on 1 June, 2023",
        "session_3": [turn | {"dia_id": "D3:1"}],
        "session_3_date_time": "sometime in spring",
    }
    body = json.dumps({"sample_id": "conv-1", "conversation": conversation, "qa": []})
    sessions = _imported(tmp_path, "locomo.json", body)
    first = sessions["Ana and Ben, session 1 (1:56 pm on 8 May, 2023)"]
    assert first["started"] == "2023-05-08T13:56:00.000000+00:00"
    second = sessions["Ana and Ben, session 2 (12:24 am on 1 June, 2023)"]
    assert second["started"] == "2023-06-01T00:24:00.000000+00:00"
    # A date that names no time is not guessed: the import's own time stands.
    assert not sessions["Ana and Ben, session 3 (sometime in spring)"]["started"].startswith("2023")


def test_a_mini_swe_agent_run_starts_at_its_first_reply_and_is_named_by_its_task(
    tmp_path: Path,
) -> None:
    # covers: LED-1
    reply = {
        "role": "assistant",
        "content": "```bash\nls\n```",
        "extra": {"response": {"created": 1775802347, "model": "m"}, "timestamp": 1775802350.5},
    }
    traj = {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "astropy__astropy-7746",
        "info": {},
        "messages": [
            {"role": "system", "content": "you are a bot"},
            {"role": "user", "content": "<pr_description>\nFix it\n</pr_description>"},
            reply,
            {"role": "user", "content": "a.py"},
        ],
    }
    sessions = _imported(tmp_path, "run.traj.json", json.dumps(traj))
    assert sessions["astropy__astropy-7746"]["started"] == "2026-04-10T06:25:47.000000+00:00"


def test_an_untitled_transcript_is_named_by_its_first_words_not_its_path(tmp_path: Path) -> None:
    # covers: LED-1
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": "<context>\nrepo: x\n</context>\n\n  Why does   the build fail?",
        },
        {"role": "assistant", "content": "A missing import."},
    ]
    sessions = _imported(tmp_path, "chat.json", json.dumps({"messages": messages}))
    assert list(sessions) == ["Why does the build fail?"]
    assert sessions["Why does the build fail?"]["source"].endswith("chat.json")


def test_each_imported_step_keeps_the_transcripts_own_time(tmp_path: Path) -> None:
    # covers: LED-1, ENG-1
    from comal.ledger import open_ledger

    lines = [
        _claude(
            type="user",
            uuid="u1",
            parentUuid=None,
            timestamp="2025-03-01T10:00:00Z",
            message={"role": "user", "content": "list the files"},
        ),
        _claude(
            type="assistant",
            uuid="a1",
            parentUuid="u1",
            timestamp="2025-03-01T10:00:05Z",
            message={
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
            },
        ),
        _claude(
            type="user",
            uuid="u2",
            parentUuid="a1",
            timestamp="2025-03-01T10:12:00Z",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        ),
        _claude(
            type="assistant",
            uuid="a2",
            parentUuid="u2",
            timestamp="2025-03-01T10:12:04Z",
            message={
                "id": "m2",
                "role": "assistant",
                "content": [{"type": "text", "text": "a.py"}],
            },
        ),
    ]
    sessions = _imported(tmp_path, "s.jsonl", "\n".join(lines) + "\n")
    led = open_ledger(tmp_path / "l.db")
    scope = led.resolve(sessions["list the files"]["session"])
    times = [e.created_at for e in led.entries(scope)]
    # One time per step, its last message's: the task; the call with its result, in twelve
    # minutes later (when the next request went out); the answer.
    assert times == [
        "2025-03-01T10:00:00.000000+00:00",
        "2025-03-01T10:12:00.000000+00:00",
        "2025-03-01T10:12:00.000000+00:00",
        "2025-03-01T10:12:04.000000+00:00",
    ]
    led.close()
