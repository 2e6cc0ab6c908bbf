"""``comal tools --surface model`` prints the catalog an agent session really sends.

# covers: DRV-7, OPS-1
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _agent_support import reply, text
from comal.agent import Flags, Runtime, load_config
from comal.ledger import open_ledger
from comal.plugins import reset_plugins
from comal.providers import ModelRequest
from comal.testing import FunctionProvider

PLUGIN = """
from pydantic import BaseModel, ConfigDict

from comal.ops import Effect, Operation, ToolOutput
from comal.plugins import hookimpl


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    word: str


@hookimpl
def comal_operations():
    return [Operation("Shout", "Say a word louder.", Args,
                      lambda a, ctx: ToolOutput(a.word.upper()), effects=(Effect("read"),))]
"""


def _cli_names(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "comal", "tools", "--surface", "model", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return sorted(t["name"] for t in json.loads(done.stdout))


def test_the_model_catalog_command_prints_what_the_agent_sends(tmp_path: Path) -> None:
    # covers: DRV-7, OPS-1
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "shout_plugin.py").write_text(PLUGIN)
    config = tmp_path / "comal.yaml"
    config.write_text("plugins: [shout_plugin]\nengine: dag\nmodel: anthropic:claude-opus-4-1\n")
    env = {
        **os.environ,
        "COMAL_CONFIG": str(config),
        "PYTHONPATH": f"{mods}:{os.environ.get('PYTHONPATH', '')}",
    }
    printed = _cli_names(env)
    # The operations the trial found missing are there, with the plugin's and the engine's.
    for name in ("BoardAdd", "WorkStepRun", "WorkDraft", "finish_call", "Shout", "ctx_search"):
        assert name in printed, name
    sent: list[ModelRequest] = []

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(request)
        return reply(text("done"))

    sys.path.insert(0, str(mods))
    try:
        (tmp_path / "ws").mkdir()
        led = open_ledger(tmp_path / "l.db")
        flags = Flags(model="anthropic:claude-opus-4-1", workspace=tmp_path / "ws")
        rt = Runtime.open(led, flags, config=load_config(config), provider=FunctionProvider(model))
        assert rt.run("hello").status == "finished"
    finally:
        sys.path.remove(str(mods))
        reset_plugins()  # the plugin this test enabled in process is no other test's
        sys.modules.pop("shout_plugin", None)
    offered = {t["name"] if isinstance(t, dict) else t.name for t in sent[0].tools}
    # The first request's tools, exactly: what the command printed is what the agent sent.
    assert sorted(offered) == printed
