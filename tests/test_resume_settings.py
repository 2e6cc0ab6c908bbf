"""A resumed session keeps its mode, effort and engine; a headless run whose calls were denied
never reports success (DRV-4, issue 32 item 2); a model from the keys present, and a new
script's count after ``-c`` (issue 32 item 10)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import comal
from _agent_support import reply, text, tool, write_script
from comal.agent import Flags, Runtime
from comal.cli import _common
from comal.cli._agent import run_prompt
from comal.ledger import open_ledger
from comal.ops import sandbox_status
from comal.ops._policy import Policy
from comal.testing import FakeServer

# The comal this test imports, for the processes it starts.
SRC = Path(comal.__file__).resolve().parents[1]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    monkeypatch.setenv("COMAL_LEDGER", str(path))
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _last_json(out: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return data


def test_a_crash_resumed_run_keeps_its_mode_and_applies_the_write(
    db: Path, ws: Path, tmp_path: Path
) -> None:
    # covers: DRV-4, RES-1, RES-4
    # The scenario, as a person runs it: `comal -p … --mode trusted`, kill -9 during a
    # Bash call, then `comal --resume ID -p` without flags.
    if not sandbox_status(Policy().sandbox).active:
        pytest.skip("Bash needs the OS sandbox (bubblewrap) here")
    script = write_script(
        tmp_path / "s.jsonl",
        [
            reply(tool("b1", "Bash", command="touch started && sleep 60")),
            reply(tool("w1", "Write", path="a.txt", content="written\n")),
            reply(text("All done.")),
        ],
    )
    env = os.environ | {"COMAL_LEDGER": str(db), "PYTHONPATH": str(SRC)}
    base = [sys.executable, "-m", "comal"]
    start = [*base, "-p", "do it", "--model", f"script:{script}", "--mode", "trusted"]
    proc = subprocess.Popen(
        [*start, "--workspace", str(ws), "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (ws / "started").exists():
            assert proc.poll() is None, "the agent ended before its Bash call ran"
            assert time.monotonic() < deadline, "the Bash call never started"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    led = open_ledger(db)
    (info,) = led.sessions()
    led.close()
    resumed = subprocess.run(
        [*base, "--resume", info.id, "-p", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed with the session's mode trusted" in resumed.stderr
    result = _last_json(resumed.stdout)
    assert result["status"] == "finished"
    assert (ws / "a.txt").read_text() == "written\n"
    (write,) = [r for r in result["receipts"] if r["operation"] == "Write"]
    assert write["status"] == "ok" and write["judgment"]["rule"] == "mode:trusted"


def test_a_headless_run_whose_calls_were_denied_does_not_report_success(
    db: Path, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: DRV-4, OPS-2
    script = write_script(
        tmp_path / "s.jsonl",
        [reply(tool("w1", "Write", path="a.txt", content="x\n")), reply(text("All done."))],
    )
    flags = Flags(model=f"script:{script}", workspace=ws, mode="ask")
    assert run_prompt("write a", flags, resume=None, as_json=True) == 6
    captured = capsys.readouterr()
    data = _last_json(captured.out)
    assert data["status"] == "denied" and data["error"]["code"] == "CALLS_DENIED"
    assert "Write w1 (deny by mode:ask)" in data["error"]["message"]
    assert "CALLS_DENIED" in captured.err and not (ws / "a.txt").exists()


def test_resume_keeps_mode_effort_and_engine_and_a_flag_changes_them_recorded(
    db: Path, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: DRV-4, RES-6
    script = write_script(
        tmp_path / "s.jsonl",
        [
            reply(tool("w1", "Write", path="a.txt", content="1\n")),
            reply(text("one")),
            reply(tool("w2", "Write", path="b.txt", content="2\n")),
            reply(text("two")),
            reply(tool("w3", "Write", path="c.txt", content="3\n")),
            reply(text("three")),
            reply(tool("w4", "Write", path="d.txt", content="4\n")),
            reply(text("four")),
        ],
    )
    first = Flags(
        model=f"script:{script}", workspace=ws, mode="trusted", effort="high", engine="dag"
    )
    assert run_prompt("one", first, resume=None, as_json=True) == 0
    session = _last_json(capsys.readouterr().out)["session"]
    # No flags: the session's mode, effort and engine, not the configuration's defaults.
    assert run_prompt("two", Flags(), resume=session, as_json=True) == 0
    captured = capsys.readouterr()
    assert "resumed with the session's mode trusted, effort high, engine dag" in captured.err
    assert (ws / "b.txt").exists()
    led = open_ledger(db)
    runtime = Runtime.open(led, Flags(), resume=session, need_model=False)
    assert (runtime.host.mode, runtime.host.effort) == ("trusted", "high")
    assert runtime.settings().engine_name == "dag"
    led.close()
    # A flag changes the mode, says so, and is recorded: the next resume keeps it.
    assert run_prompt("three", Flags(mode="read-only"), resume=session, as_json=True) == 6
    captured = capsys.readouterr()
    assert "--mode read-only replaces the session's mode trusted" in captured.err
    assert not (ws / "c.txt").exists()
    assert run_prompt("four", Flags(), resume=session, as_json=True) == 6
    assert not (ws / "d.txt").exists()
    led = open_ledger(db)
    scope = led.resolve(session)
    (changed,) = [e.body for e in led.records(scope, "event") if e.kind == "session_settings"]
    assert changed["changed"] == {"mode": ["trusted", "read-only"]}
    assert changed["by"] == {"mode": "flag"}
    assert changed["settings"]["engine"] == "dag"
    led.close()


def test_continue_with_a_new_script_starts_at_its_first_reply(
    db: Path, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: DRV-4
    old = write_script(
        tmp_path / "old.jsonl",
        [reply(tool("w1", "Write", path="a.txt", content="1\n")), reply(text("first"))],
    )
    flags = Flags(model=f"script:{old}", workspace=ws, mode="trusted")
    assert run_prompt("one", flags, resume=None, as_json=True) == 0
    capsys.readouterr()
    new = write_script(tmp_path / "new.jsonl", [reply(text("from the new script"))])
    code = run_prompt("and now", Flags(model=f"script:{new}"), resume=None, latest=True)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "from the new script" in captured.out
    said = captured.err.replace("\n", "")
    assert "the session now runs with model script:" in said and "new.jsonl (flag)" in said
    # Back to the old script: it goes on where it stopped (it answered 2 requests).
    old.write_text(old.read_text() + json.dumps(reply(text("old again"))) + "\n")
    code = run_prompt("again", Flags(model=f"script:{old}"), resume=None, latest=True)
    assert code == 0 and "old again" in capsys.readouterr().out


def test_a_model_is_chosen_from_the_keys_present_and_said_once(
    db: Path, ws: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: CFG-1
    with FakeServer([{"content": "hello"}]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        assert run_prompt("hi", Flags(workspace=ws), resume=None, as_json=True) == 0
        (request,) = server.requests
    err = capsys.readouterr().err
    assert err.count("using anthropic:claude-sonnet-4-6 because ANTHROPIC_API_KEY") == 1
    assert request.body["model"] == "claude-sonnet-4-6"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    led = open_ledger(db)
    runtime = Runtime.open(led, Flags(workspace=ws))
    assert runtime.spec == "openai:gpt-5.1" and "OPENAI_API_KEY is set" in runtime.notes[0]
    led.close()
