"""The engine's command-line contract: replay, evidence, state, compact."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from comal.cli import app
from conftest import corpus_dir

runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _transcript() -> Path:
    return next(corpus_dir().glob("mini-swe-agent/deepseek-chat__django__django-15388*"))


def test_replay_json_dump_and_plot_contract(tmp_path: Path) -> None:
    # covers: LIM-1, LIM-2, LIM-3, OBS-1
    db, dump, plot = tmp_path / "r.db", tmp_path / "dump", tmp_path / "replay.png"
    out = _run(
        "--ledger", str(db), "replay", str(_transcript()), "--engine", "limit",
        "--context-window", "16000", "--json", "--dump", str(dump), "--plot", str(plot),
    )  # fmt: skip
    lines = [json.loads(line) for line in out.splitlines()]
    turns, summary = lines[:-1], lines[-1]["summary"]
    assert all({"turn", "input_tokens", "full_tokens", "fits", "actions"} <= set(t) for t in turns)
    assert summary["turns"] == len(turns) and summary["checkpoints"] >= 1
    assert summary["tokens_sent"] < summary["tokens_full"]
    assert all(t["fits"] for t in turns)
    kinds = {a["kind"] for t in turns for a in t["actions"]}
    assert {"referenced", "checkpointed"} <= kinds
    first = json.loads((dump / "turn-0001.json").read_text())
    assert set(first) == {"system", "messages", "tools"} or set(first) == {"messages", "tools"}
    assert len(list(dump.glob("turn-*.json"))) == len(turns)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    return_to_evidence(db, dump, summary["session"])


def return_to_evidence(db: Path, dump: Path, session: str) -> None:
    """Every exact reference in a dumped request names an entry and a digest that
    ``comal evidence`` reads back."""
    pattern = re.compile(
        r'EvidenceRead\(entry=(\d+), field=\\?"content\\?", expected_digest=\\?"(\w{64})'
    )
    seen = 0
    for path in sorted(dump.glob("turn-*.json"))[-3:]:
        for entry, digest in set(pattern.findall(path.read_text())):
            args = ["evidence", session, "--entry", entry, "--digest", digest, "--json"]
            page = json.loads(_run("--ledger", str(db), *args))
            assert {"text", "digest", "offset", "next_call"} <= set(page)
            assert page["digest"] == digest and page["offset"] == 0
            seen += 1
    assert seen > 0


def test_headless_replay_crosses_the_threshold_and_compacts(tmp_path: Path) -> None:
    # covers: LIM-2, LIM-3 — regression: openai/codex #16033 (compaction silently never fired)
    db = tmp_path / "h.db"
    out = _run("--ledger", str(db), "replay", str(_transcript()), "--context-window", "45000",
               "--json")  # fmt: skip
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert summary["full_over_window"] > 0, "the run must cross the window unmanaged"
    assert summary["over_window"] == 0 and summary["checkpoints"] + summary["references"] > 0


def test_state_and_compact(tmp_path: Path) -> None:
    # covers: LIM-3, LIM-7
    db = tmp_path / "s.db"
    _run("--ledger", str(db), "import", str(_transcript()))
    session = json.loads(_run("--ledger", str(db), "sessions", "--json"))[0]["session"]
    state = json.loads(_run("--ledger", str(db), "state", session, "--json"))
    assert state["requests"] and state["commands"]
    text = _run("--ledger", str(db), "state", session)
    assert "Deterministic checkpoint" in text
    made = json.loads(_run("--ledger", str(db), "compact", session, "--json"))
    cp = made["checkpoint"]
    assert cp is not None and cp["first_seq"] <= cp["last_seq"]
    again = json.loads(_run("--ledger", str(db), "compact", session, "--json"))
    assert again["checkpoint"] is None or again["checkpoint"]["last_seq"] >= cp["last_seq"]
    ctx = json.loads(_run("--ledger", str(db), "context", session, "--json"))
    assert ctx["entries"] > 0


def test_compact_is_queued_while_an_agent_holds_the_session(tmp_path: Path) -> None:
    # covers: LIM-7, RES-2
    from comal.agent import (
        COMPACT_APPLIED,
        Agent,
        AgentSettings,
        lock_session,
        queued_compactions,
    )
    from comal.ledger import open_ledger
    from comal.ops import House, Policy, Workspace, default_registry, unguarded
    from comal.testing import ScriptedProvider

    db = tmp_path / "q.db"
    _run("--ledger", str(db), "import", str(_transcript()))
    session = json.loads(_run("--ledger", str(db), "sessions", "--json"))[0]["session"]
    led = open_ledger(db)
    scope = led.resolve(session)
    with lock_session(led, scope):
        queued = json.loads(_run("--ledger", str(db), "compact", session, "--json"))
        assert queued["queued"] is True and queued["checkpoint"] is None
        assert queued_compactions(led, scope) == 1
        assert led.latest_checkpoint(scope) is None
        # The agent holding the session applies it at the start of its next turn.
        reply = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}
        house = House(
            led, scope, default_registry(), Policy(), workspace=Workspace(tmp_path),
            guard=unguarded,
        )  # fmt: skip
        settings = AgentSettings.for_model("claude-sonnet-4-6")
        Agent(led, scope, ScriptedProvider([reply]), house, settings).run("go on")
    assert queued_compactions(led, scope) == 0
    assert led.latest_checkpoint(scope) is not None
    assert [r.kind for r in led.records(scope, "event")].count(COMPACT_APPLIED) == 1
    led.close()
