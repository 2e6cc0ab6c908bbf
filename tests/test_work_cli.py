"""Long work through the command line and the HTTP API: a scripted coordinator and its steps'
scripts (``PATH.children/n.jsonl``), and the tree of sessions and work steps on every surface
(LED-3, WRK-1, BRD-2, SRF-1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool
from _work_support import FINAL_ANSWER, FINAL_FILES, write_lines, write_scripts
from comal.cli import app, main
from comal.ledger import open_ledger
from comal.work import steps_of
from serve._support import proxy

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"checks": ["test -f a/one.txt"], "work": {"parallel": 2}}))
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    monkeypatch.setenv("COMAL_LEDGER", str(tmp_path / "ledger.db"))
    (tmp_path / "ws").mkdir()
    return tmp_path


def comal(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    else:
        code = 0
    return code, capsys.readouterr().out


def run(env: Path, capsys: pytest.CaptureFixture[str], script: Path, *more: str) -> dict[str, Any]:
    flags = ["--model", f"script:{script}", "--mode", "trusted", "--workspace", str(env / "ws")]
    code, out = comal(capsys, *more, *flags, "--json")
    data: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    data["code"] = code
    return data


def test_a_scripted_coordinator_runs_its_steps_from_their_scripts_and_shows_the_tree(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: WRK-1, WRK-4, WRK-5, LED-3, BRD-2, SRF-1
    script = write_scripts(env / "scripts")
    done = run(env, capsys, script, "-p", "Coordinate the three steps.")
    assert (done["code"], done["status"], done["answer"]) == (0, "finished", FINAL_ANSWER)
    for path, body in FINAL_FILES.items():
        assert (env / "ws" / path).read_text() == body
    parent = done["session"]
    # comal sessions: each step's child session under its parent.
    rows = json.loads(runner.invoke(app, ["sessions", "--json"]).stdout)
    # Newest first: the steps, in the order they ran, are the oldest first.
    kids = sorted((r for r in rows if r["parent"] == parent), key=lambda r: r["started"])
    assert len(kids) == 3 and {r["agent"] for r in kids} == {"comal"}  # the coordinator's
    listed = runner.invoke(app, ["sessions"], terminal_width=200).stdout
    assert listed.count("└ ") == 3 and listed.index(parent) < listed.index(kids[0]["session"])
    # comal show: the board, the steps as a tree, the draft; a step names its parent.
    shown = runner.invoke(app, ["show", parent], terminal_width=200).stdout
    assert "#1 [verified] step a done" in shown
    for n, kid in enumerate(kids, 1):
        assert f"step #{n} {kid['session']} finished (finished)" in shown
    assert "draft 'Report' v1" in shown
    child = runner.invoke(app, ["show", kids[0]["session"]], terminal_width=200).stdout
    assert f"work step of session {parent}" in child
    # comal state --json (= /state): the board, the steps, the drafts.
    state = json.loads(runner.invoke(app, ["state", parent, "--json"]).stdout)
    work = state["work"]
    assert [i["status"] for i in work["board"]["items"]] == ["verified"] * 3
    assert [s["outcome"] for s in work["steps"]] == ["finished"] * 3
    assert len(work["drafts"]) == 1 and work["steps"][0]["work"]["board"]["items"] == []
    # Resuming a finished session does not call the model (RES-1).
    again = run(env, capsys, script, "--resume", parent, "-p")
    assert (again["code"], again["status"], again["turns"]) == (0, "finished", 0)
    # The HTTP API: the session view carries its children and its work.
    with proxy(env, []) as px:
        view = httpx.get(f"{px.url}/api/sessions/{parent}").json()
        assert sorted(view["children"]) == sorted(k["session"] for k in kids)
        assert [s["child"] for s in view["work"]["steps"]] == [k["session"] for k in kids]
        assert view["work"]["drafts"][0]["title"] == "Report"


def test_a_step_without_its_script_or_with_a_model_not_allowed_is_refused(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: WRK-1, CFG-2
    other = write_lines(env / "other.jsonl", [reply(text("other model done"))])
    script = write_lines(
        env / "coord.jsonl",
        [
            reply(
                tool("missing", "WorkStepRun", objective="no script for me"),
                tool("named", "WorkStepRun", objective="x", model=f"script:{other}"),
            ),
            reply(text("stop")),
            reply(tool("named2", "WorkStepRun", objective="x", model=f"script:{other}")),
            reply(tool("wait", "WorkStepWait")),
            reply(text("stop")),
        ],
    )
    first = run(env, capsys, script, "-p", "go", "--max-turns", "2")
    receipts = {r["call_id"]: r for r in first["receipts"]}
    assert receipts["missing"]["observations"]["error"] == "WORK_STEP_REFUSED"
    assert receipts["named"]["observations"]["error"] == "WORK_STEP_REFUSED"
    # The operator allows the other model for work steps: the same call is taken.
    config = env / "config.json"
    config.write_text(json.dumps({"work": {"models": [f"script:{other}"]}}))
    resumed = run(env, capsys, script, "--resume", first["session"], "-p")
    assert resumed["status"] == "finished"
    taken = {r["call_id"]: r for r in resumed["receipts"]}
    assert taken["named2"]["status"] == "ok"
    with open_ledger(env / "ledger.db") as led:
        scope = led.resolve(first["session"])
        (step,) = steps_of(led, scope)
        assert step.answer == "other model done" and step.delegation.config["model"].endswith(
            "other.jsonl"
        )


def test_over_its_budget_the_command_line_says_what_remains(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: WRK-5
    (env / "config.json").write_text(json.dumps({"work": {"budget": {"turns": 1}}}))
    script = write_lines(
        env / "coord.jsonl",
        [reply(tool("a", "BoardAdd", text="one thing")), reply(text("never"))],
    )
    limited = run(env, capsys, script, "-p", "go")
    assert (limited["code"], limited["status"]) == (4, "budget_limited")
    assert limited["error"]["code"] == "BUDGET_LIMITED"
    assert "board #1 [pending] one thing" in limited["error"]["message"]
