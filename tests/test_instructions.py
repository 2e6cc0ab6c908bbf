"""Instructions from files (DRV-1, issue 32 item 1): the workspace's AGENTS.md (else CLAUDE.md),
the user's own file and nested ones reach the model in the system prompt, cache-stable, recorded
in the ledger, put back by ``comal replay --dump``, shown by ``comal context``, and kept by every
engine through compaction."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool
from comal.agent import INSTRUCTIONS_EVENT, Config, Flags, Runtime
from comal.cli import _common, app
from comal.ledger import open_ledger
from comal.providers import ModelRequest, anthropic_params
from comal.testing import FunctionProvider

runner = CliRunner()
MODEL = "anthropic:claude-sonnet-4-6"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    monkeypatch.setenv("COMAL_LEDGER", str(path))
    return path


def _system(request: dict[str, Any]) -> str:
    system = request.get("system", "")
    if isinstance(system, list):
        return "".join(block["text"] for block in system)
    return str(system)


def _user_dir() -> Path:
    # The autouse fixture points XDG_CONFIG_HOME at a temporary directory.
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "comal"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_instruction_files_reach_every_request_recorded_and_replayed(
    db: Path, tmp_path: Path
) -> None:
    # covers: DRV-1, CCH-1
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "AGENTS.md").write_text("ROOT-MARKER: run the tests before answering.\n")
    (ws / "CLAUDE.md").write_text("SHADOWED-MARKER: AGENTS.md wins over CLAUDE.md.\n")
    (ws / "pkg" / "CLAUDE.md").write_text("NESTED-MARKER: pkg uses tabs.\n")
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (_user_dir() / "AGENTS.md").write_text("USER-MARKER: answer in English.\n")
    sent: list[dict[str, Any]] = []
    script = [
        reply(tool("b1", "Bash", command="true")),  # no path judged: nothing nested loads
        reply(tool("r1", "Read", path="pkg/mod.py")),  # loads pkg/CLAUDE.md
        reply(tool("b2", "Bash", command="true")),
        reply(tool("w1", "Edit", path="AGENTS.md", old_string="ROOT-MARKER", new_string="ROOT-V2")),
        reply(text("done")),
    ]

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(anthropic_params(request))
        return script[len(sent) - 1]

    led = open_ledger(db)
    flags = Flags(model=MODEL, workspace=ws, mode="trusted")
    rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(model))
    assert rt.run("work").status == "finished"
    systems = [_system(r) for r in sent]
    first = systems[0]
    assert "ROOT-MARKER" in first and "USER-MARKER" in first
    assert "SHADOWED-MARKER" not in first and "NESTED-MARKER" not in first
    assert systems[1] == first  # byte-identical while no file changed (cache-stable)
    assert "NESTED-MARKER" in systems[2] and systems[3] == systems[2]
    assert "ROOT-V2" in systems[4] and "ROOT-MARKER" not in systems[4]
    assert rt.scope is not None
    events = led.records(rt.scope, "event")
    recorded = [e.body for e in events if e.kind == INSTRUCTIONS_EVENT]
    assert len(recorded) == 3  # the first request, the nested file, the edited root file
    assert recorded[0]["text"] in first and "USER-MARKER" in recorded[0]["text"]
    sources = recorded[1]["sources"]
    assert [s["scope"] for s in sources] == ["user", "workspace", "nested"]
    assert [s["path"] for s in sources][1:] == ["AGENTS.md", "pkg/CLAUDE.md"]
    # Each change of the prefix is an announced edit, never an unexplained break.
    assert not [e for e in events if e.kind == "cache_break"]
    edits = [e.body for e in events if e.kind == "cache_edit"]
    assert [e["reason"] for e in edits if e["part"] == "system"] == [
        "instructions changed: pkg/CLAUDE.md",
        "instructions changed: AGENTS.md",
    ]
    led.close()
    dump = tmp_path / "dump"
    out = runner.invoke(app, ["replay", rt.scope.session, "--dump", str(dump), "--json"])
    assert out.exit_code == 0, out.output
    dumped = [json.loads(p.read_text()) for p in sorted(dump.glob("turn-*.json"))]
    assert [_system(d) for d in dumped] == systems  # exactly as the live requests had them
    for live, replayed in zip(sent, dumped, strict=True):
        assert replayed["messages"] == live["messages"]


def test_comal_context_shows_the_instructions_line_with_their_tokens(
    db: Path, tmp_path: Path
) -> None:
    # covers: DRV-1
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "CLAUDE.md").write_text("Use pytest. " * 50)
    led = open_ledger(db)
    rt = Runtime.open(
        led,
        Flags(model=MODEL, workspace=ws),
        config=Config(),
        provider=FunctionProvider(lambda r: reply(text("ok"))),
    )
    assert rt.run("hi").status == "finished"
    assert rt.scope is not None
    led.close()
    report = json.loads(runner.invoke(app, ["context", rt.scope.session, "--json"]).stdout)
    assert report["instructions"] > 100
    (listed,) = report["instruction_files"]
    assert listed["path"] == "CLAUDE.md" and listed["scope"] == "workspace"
    assert listed["tokens"] > 100
    shown = runner.invoke(app, ["context", rt.scope.session])
    assert shown.exit_code == 0
    assert "instructions" in shown.stdout and "CLAUDE.md (workspace)" in shown.stdout


@pytest.mark.parametrize("engine", ["limit", "dag", "pipeline"])
def test_every_engine_keeps_the_instructions_through_compaction(
    db: Path, tmp_path: Path, engine: str
) -> None:
    # covers: DRV-1, ENG-2
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("KEEP-MARKER: never push to main.\n")
    sent: list[dict[str, Any]] = []

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(anthropic_params(request))
        n = len(sent)
        if n > 12:
            return reply(text("done"))
        return reply(text(f"step {n}"), tool(f"c{n}", "Bash", command=f"seq {n * 700}"))

    led = open_ledger(db)
    flags = Flags(model=MODEL, workspace=ws, mode="trusted", engine=engine, context_window=8_000)
    rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(model))
    assert rt.run("count a lot").status == "finished"
    assert rt.scope is not None
    kinds = {e.kind for e in led.records(rt.scope, "event")}
    # The engine had to compact: a checkpoint, dag summaries or pipeline summaries.
    assert kinds & {"checkpointed", "dag_summarized", "pipeline_summarized"}
    assert all("KEEP-MARKER" in _system(r) for r in sent)
    assert len({_system(r) for r in sent}) == 1
    led.close()


def test_a_link_out_of_the_workspace_is_not_read(db: Path, tmp_path: Path) -> None:
    # covers: DRV-1
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-TOKEN\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").symlink_to(secret)
    (ws / "CLAUDE.md").write_text("FALLBACK-MARKER\n")
    sent: list[str] = []

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(request.system or "")
        return reply(text("ok"))

    led = open_ledger(db)
    rt = Runtime.open(
        led, Flags(model=MODEL, workspace=ws), config=Config(), provider=FunctionProvider(model)
    )
    assert rt.run("hi").status == "finished"
    assert "SECRET-TOKEN" not in sent[0] and "FALLBACK-MARKER" in sent[0]
    led.close()
