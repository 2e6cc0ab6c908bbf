"""A replay sends what the live turn sent, byte for byte, under every engine (issue 33, item 4):
the limit engine's second checkpoint lists the files in the order the live one did (the live
state is read back from the ledger's sorted JSON), and the dag's summaries are named by the ids
the live run stored, not by ids the replay made up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool
from comal.agent import Config, Flags, Runtime
from comal.cli import _common, app
from comal.ledger import open_ledger
from comal.providers import ModelRequest, anthropic_params
from comal.testing import FunctionProvider

runner = CliRunner()
NAMES = ("zeta", "alpha", "mid", "beta", "omega", "gamma", "delta", "kappa", "iota", "eta")


@pytest.mark.parametrize("engine", ["limit", "dag", "pipeline"])
def test_replay_sends_what_the_live_turns_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # covers: ENG-2, LIM-3, DAG-6, SRF-2
    db = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(db))
    monkeypatch.setenv("COMAL_LEDGER", str(db))
    sent: list[dict[str, Any]] = []
    steps = 24

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(anthropic_params(request))
        n = len(sent)
        if n > steps:
            return reply(text("done"))
        name = NAMES[n % len(NAMES)]
        return reply(
            text(f"step {n}"),
            tool(f"w{n}", "Write", path=f"{name}{n}.txt", content=f"{name}\n" * 40),
            tool(f"c{n}", "Bash", command=f"seq {n * 300}"),
        )

    (tmp_path / "ws").mkdir()
    flags = Flags(
        model="anthropic:claude-sonnet-4-6",
        context_window=9_000,
        workspace=tmp_path / "ws",
        mode="trusted",
    )
    led = open_ledger(db)
    settings = {"defer_compaction": False} if engine == "dag" else {}
    config = Config(engine=engine, engine_settings=settings)
    rt = Runtime.open(led, flags, config=config, provider=FunctionProvider(model))
    result = rt.run("write and count a lot")
    assert result.status == "finished", result.error
    assert rt.scope is not None
    made = led.summaries(rt.scope) if engine == "dag" else led.checkpoints(rt.scope)
    assert len(made) >= 2, f"{engine} compacted {len(made)} times"
    led.close()
    dump = tmp_path / "dump"
    out = runner.invoke(
        app,
        [
            "replay", rt.scope.session, "--model", "anthropic:claude-sonnet-4-6",
            "--context-window", "9000", "--engine", engine, "--dump", str(dump), "--json",
        ],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    dumped = [p.read_text() for p in sorted(dump.glob("turn-*.json"))]
    assert len(dumped) == len(sent)
    import json

    for n, (live, replayed) in enumerate(zip(sent, map(json.loads, dumped), strict=True)):
        for key in ("system", "tools", "messages"):
            assert replayed[key] == live[key], f"turn {n + 1}: {key} differs"
