"""Issue 30, item 9: ``finish_call`` closed a task whose delegated step ended incomplete, and
said nothing of it.

A step that ran out of turns or budget, or whose model failed, is ``incomplete`` (WRK-3: never
a success), yet ``finish_call`` only waited for *unfinished* steps: with no check failing the
task was ``finished`` and nothing recorded that a step of it never was. Now a finish with an
incomplete step is refused (``FINISH_INCOMPLETE``) unless the model names that step and why
it accepts it (``accept_incomplete: [{step, reason}]``), checked against the steps the ledger
holds; the receipt and the ``finish_checks`` event carry what was accepted, and ``/state``
(``comal state``) shows it beside the step. The house's own finish, when the model stops
without calling it, accepts nothing: it is refused the same way and the model is told how.

The attack runs through the real command line and the ``script:`` model.
"""

# covers: WRK-5, WRK-3, BRD-2

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool
from _work_support import write_lines
from comal.cli import app, main
from comal.ledger import open_ledger
from comal.ops import receipts

runner = CliRunner()
WHY = "the log step was optional: a.txt is the deliverable"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "config.json"
    config.write_text("{}")
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    monkeypatch.setenv("COMAL_LEDGER", str(tmp_path / "ledger.db"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "log.txt").write_text("old\n")
    return tmp_path


def _run(env: Path, capsys: pytest.CaptureFixture[str], script: Path) -> dict[str, Any]:
    flags = ["--model", f"script:{script}", "--mode", "trusted", "--workspace", str(env / "ws")]
    try:
        main(["-p", "two steps", *flags, "--json"])
    except SystemExit:
        pass
    data: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return data


def _steps(folder: Path, *coordinator: dict[str, Any]) -> Path:
    """Step 1 writes a.txt and finishes; step 2 reads in a loop and runs out of turns."""
    script = write_lines(
        folder / "coord.jsonl",
        [
            reply(
                tool("run1", "WorkStepRun", objective="write a.txt", tools=["Write"]),
                tool("run2", "WorkStepRun", objective="log", tools=["Read"], max_turns=1),
            ),
            reply(tool("wait", "WorkStepWait")),
            *coordinator,
        ],
    )
    kids = folder / "coord.jsonl.children"
    write_lines(kids / "1.jsonl", [reply(tool("w", "Write", path="a.txt", content="a\n")),
                                   reply(text("wrote a.txt"))])  # fmt: skip
    write_lines(kids / "2.jsonl", [reply(tool(f"r{i}", "Read", path="log.txt")) for i in (1, 2)])
    return script


def _finish(call_id: str, **args: Any) -> dict[str, Any]:
    return reply(text("Done: a.txt is written."), tool(call_id, "finish_call", **args))


def test_finish_call_refuses_an_incomplete_step_the_model_does_not_accept(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    accepted = [{"step": 2, "reason": WHY}]
    script = _steps(
        env,
        _finish("plain"),
        _finish("finished", accept_incomplete=[{"step": 1, "reason": "x"}, *accepted]),
        _finish("blank", accept_incomplete=[{"step": 2, "reason": "  "}]),
        _finish("fin", accept_incomplete=accepted),
    )
    done = _run(env, capsys, script)
    assert done.get("status") == "finished", done
    with open_ledger(env / "ledger.db") as led:
        scope = led.resolve(done["session"])
        made = {r.call_id: r for r in receipts(led, scope)}
        said = {
            e.message.tool_result.call_id: e.message.tool_result.text
            for e in led.entries(scope)
            if e.message.tool_result is not None
        }
    # Without a word on step 2 the finish is refused, naming the step and the way out.
    assert made["plain"].status == "error", said["plain"]
    assert made["plain"].observations["error"] == "FINISH_INCOMPLETE"
    assert "step #2" in said["plain"] and "max_turns" in said["plain"]
    assert "accept_incomplete" in said["plain"]
    # Accepting a step that did finish is refused: the list is checked against the ledger.
    assert made["finished"].observations["error"] == "FINISH_INCOMPLETE"
    assert "#1" in said["finished"] and "finished" in said["finished"]
    assert made["blank"].status != "ok"  # a reason is words, not blanks
    # Named with its reason: the task closes, and the receipt says what it accepted.
    fin = made["fin"]
    assert fin.status == "ok" and fin.observations["passed"] is True
    (row,) = fin.observations["accepted_incomplete"]
    assert (row["step"], row["status"], row["reason"]) == (2, "max_turns", WHY)
    assert "accepted incomplete: step #2" in said["fin"]
    # /state (comal state) shows it beside the step.
    state = json.loads(runner.invoke(app, ["state", done["session"], "--json"]).stdout)
    steps = state["work"]["steps"]
    assert [s["outcome"] for s in steps] == ["finished", "incomplete"]
    assert "accepted" not in steps[0]
    assert steps[1]["accepted"]["reason"] == WHY and steps[1]["accepted"]["passed"] is True
    shown = runner.invoke(app, ["state", done["session"]], terminal_width=200).stdout
    assert f"accepted at finish: {WHY}" in shown


def test_the_houses_own_finish_accepts_no_incomplete_step(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model answers without finish_call: the house finishes for it, accepting nothing.
    script = _steps(
        env, reply(text("Done.")), _finish("fin", accept_incomplete=[{"step": 2, "reason": WHY}])
    )
    done = _run(env, capsys, script)
    assert done.get("status") == "finished", done
    with open_ledger(env / "ledger.db") as led:
        scope = led.resolve(done["session"])
        told = [e.message.text for e in led.entries(scope) if e.role == "user"][-1]
        houses = [r for r in receipts(led, scope) if r.call_id.startswith("finish-")]
    assert "step #2" in told and "accept_incomplete" in told
    assert [r.observations.get("error") for r in houses] == ["FINISH_INCOMPLETE"]
