"""The governed browser in real headless Chromium (Debian's), offline: a scripted model drives
the comal.chrome plugin against a small loopback site, a deploy target and a publish target
that counts publishes (WEB-1, PLG-1, LIM-6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _agent_support import reply, text, tool
from _chrome_support import World, task_script, workspace, world, write_json, write_script
from comal.agent import Flags
from comal.cli import _common
from comal.cli._agent import run_prompt
from comal.ledger import open_ledger
from comal.ops import receipts

pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed"
)


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    return path


def run(
    w: World, tmp: Path, script: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, **cfg: Any
) -> tuple[int, list[Any], dict[str, str]]:
    ws = tmp / "ws" if (tmp / "ws").exists() else workspace(tmp)
    config = w.settings(**cfg.pop("chrome", {})) | {"allow": ["ChromePublish"]} | cfg
    monkeypatch.setenv("COMAL_CONFIG", str(write_json(tmp / "config.json", config)))
    path = write_script(tmp / "task.jsonl", script)
    flags = Flags(model=f"script:{path}", mode="trusted", workspace=ws)
    code = run_prompt("Do the browser task.", flags, resume=None, as_json=True)
    led = open_ledger(_common.STATE.ledger_path)
    try:
        scope = led.sessions()[-1].scope
        found = receipts(led, scope)
        results = {
            r.tool_result.call_id: r.tool_result.text if isinstance(r.tool_result.text, str) else ""
            for e in led.entries(scope)
            for r in [e.message]
            if r.tool_result is not None
        }
    finally:
        led.close()
    return code, found, results


# covers: WEB-1, PLG-1
def test_open_fill_click_deploy_publish_finish(
    tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world(tmp_path) as w:
        code, found, results = run(w, tmp_path, task_script(w.site), monkeypatch)
        by_op = {r.operation: r for r in found}
        assert code == 0, results
        assert w.site_counts.clicks == 1
        assert [p for p in w.target.publishes] == [by_op["ChromePublish"].observations["digest"]]
        assert by_op["ChromePublish"].observations["identity"] == w.target.digest()
        for op in ("ChromeFill", "ChromeClick"):
            seen = by_op[op].observations
            assert seen["before"].startswith("sha256:") and seen["after"] != seen["before"]
        assert by_op["ChromeDeploy"].observations["postcondition"] is True
        assert (w.deploy_dir / "current" / "index.html").read_text() == "<h1>Hello</h1>\n"
        assert by_op["ChromeFinish"].status == "ok"
        assert w.evil_counts.hits == []
