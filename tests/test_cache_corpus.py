"""CCH-1 over real transcripts: replayed through the agent's proposer (its system prompt, its
tools, its engine), every request repeats the previous one's prefix except where a deliberate
edit announced the change. ``pytest -s`` prints the events per transcript and window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from comal.agent import Flags, Runtime
from comal.agent._cache import watch_replay
from comal.cli import app
from comal.context import get_engine
from comal.ledger import open_ledger
from comal.turns import replay
from conftest import corpus_dir

# covers: CCH-1

TRANSCRIPTS = [
    "claude-code/ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    "codex/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl",
    "mini-swe-agent/deepseek-chat__django__django-15388.traj.json",
    "openhands/runtime_trajs_basic_interactions.json",
]
WINDOWS = (16_000, 45_000, 128_000)
runner = CliRunner()


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_replayed_transcripts_break_the_cache_only_at_announced_edits(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = corpus_dir() / name
    db = tmp_path / "l.db"
    monkeypatch.setenv("COMAL_LEDGER", str(db))
    imported = runner.invoke(app, ["import", str(path), "--json"])
    assert imported.exit_code == 0, imported.output
    session = json.loads(imported.stdout.splitlines()[0])["session"]
    led = open_ledger(db)
    scope = led.resolve(session)
    entries = list(led.iter_entries(scope))
    print(f"\n{name}: {len(entries)} entries")
    for window in WINDOWS:
        flags = Flags(model="anthropic:claude-sonnet-4-6", context_window=window)
        rt = Runtime.open(led, flags, resume=session, need_model=False)
        proposer = rt.proposer()
        settings = rt.settings()
        turns = replay(
            entries,
            session,
            proposer.budget(),
            settings.engine,
            engine=get_engine(settings.engine_name),
            system=(proposer.system_message,),
        )
        findings = list(
            watch_replay(
                turns,
                model=settings.model,
                system=proposer.system_text,
                tools=proposer.tools_digest,
                entries=entries,
            )
        )
        edits = [f for _, f in findings if f is not None and f.announced]
        breaks = [(t.turn, f.part) for t, f in findings if f is not None and not f.announced]
        reasons: dict[str, int] = {}
        for f in edits:
            assert f.reason is not None
            reasons[f.reason] = reasons.get(f.reason, 0) + 1
        sent = sum(1 for t, _ in findings if t.assembly is not None)
        print(
            f"  window {window:>7,}: {sent} requests, {len(breaks)} cache_break, "
            f"{len(edits)} cache_edit {reasons or ''}"
        )
        assert breaks == [], breaks
    led.close()
