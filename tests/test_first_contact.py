"""What a newcomer's first hour met (issue 19): flags that contradict each other, an empty
prompt, a transcript path that does not exist, the bench's strategy list and its report, what
a replay says an engine did, and the /context history line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, write_script
from comal.cli import app, main
from conftest import corpus_dir

runner = CliRunner()


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    captured = capsys.readouterr()
    code = done.value.code
    return (code if isinstance(code, int) else 1), captured.out + captured.err


def _json_line(said: str) -> Any:
    return json.loads(next(line for line in said.splitlines() if line.startswith("{")))


def _ctf() -> Path:
    return corpus_dir() / "swe-agent" / "ctf_web_i_got_id_demo.traj"


def test_continue_and_resume_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-1
    script = write_script(tmp_path / "s.jsonl", [reply(text("hi")), reply(text("again"))])
    db, model = str(tmp_path / "l.db"), f"script:{script}"
    code, said = _main(capsys, "--ledger", db, "-p", "hello", "--model", model, "--json")
    assert code == 0
    session = _json_line(said)["session"]
    code, said = _main(capsys, "--ledger", db, "-c", "--resume", session, "-p", "more", "--json")
    assert code == 2 and "--resume" in said and "-c" in said, said
    assert _json_line(said)["error"]["code"] == "USER_ERROR"


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_an_empty_prompt_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], prompt: str
) -> None:
    # covers: CFG-1
    script = write_script(tmp_path / "s.jsonl", [reply(text("hi"))])
    db = tmp_path / "l.db"
    code, said = _main(capsys, "--ledger", str(db), "-p", prompt, "--model", f"script:{script}")
    assert code == 2 and "prompt is empty" in said, said
    from comal.ledger import open_ledger

    if db.exists():
        with open_ledger(db) as led:
            assert led.sessions() == []  # nothing was started


@pytest.mark.parametrize("target", ["/nonexistent.json", "runs/missing.traj", "./x"])
def test_replay_of_a_missing_file_says_the_file_does_not_exist(tmp_path: Path, target: str) -> None:
    # covers: CFG-1
    result = runner.invoke(app, ["--ledger", str(tmp_path / "l.db"), "replay", target, "--json"])
    error = json.loads(result.stdout)["error"]
    assert result.exit_code == 2 and error["code"] == "INPUT_ERROR"
    assert target in error["message"] and "no such file" in error["message"]


def test_bench_strategies_come_from_the_registry() -> None:
    # covers: CFG-1
    from comal.bench import default_strategies
    from comal.context import engine_names

    names = default_strategies()
    assert "comal-pipeline" in names
    assert [n for n in names if n.startswith("comal-")] == [f"comal-{e}" for e in engine_names()]
    shown = " ".join(runner.invoke(app, ["bench", "compare", "--help"]).stdout.split())
    for form in ("full", "comal-limit", "comal-dag", "comal-pipeline", "masking-N",
                 "langchain-trim", "langchain-context-editing",
                 "langchain-summarization"):  # fmt: skip
        assert form in shown, form


def test_bench_compare_errors_exit_2(tmp_path: Path) -> None:
    # covers: CFG-1
    not_a_transcript = tmp_path / "notes.json"
    not_a_transcript.write_text('{"hello": "world"}')
    for args in (
        [str(not_a_transcript)],
        [str(_ctf()), "--strategies", "nope"],
        [str(_ctf()), "--windows", "abc"],
    ):
        result = runner.invoke(app, ["bench", "compare", *args, "--json"])
        assert result.exit_code == 2, (args, result.output)
        assert json.loads(result.stdout.splitlines()[-1])["error"]["code"] == "USER_ERROR"


def test_the_bench_report_links_its_plots(tmp_path: Path) -> None:
    # covers: CFG-1
    out = tmp_path / "out"
    args = ["bench", "compare", str(_ctf()), "--windows", "16000", "--quick",
            "--strategies", "full,comal-limit", "--out", str(out)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    for plot in sorted(out.glob("*.png")):
        assert f"]({plot.name})" in report, plot.name
    assert list(out.glob("*.png")), "matplotlib is installed: the plots are drawn"


@pytest.mark.parametrize(
    ("engine", "stored"), [("dag", "dag_summarized"), ("pipeline", "pipeline_summarized")]
)
def test_a_replay_says_what_the_engine_did(tmp_path: Path, engine: str, stored: str) -> None:
    # covers: OBS-2, DAG-1, PIP-1
    args = ["--ledger", str(tmp_path / "r.db"), "replay", str(_ctf()), "--engine", engine,
            "--context-window", "16000"]  # fmt: skip
    as_json = runner.invoke(app, [*args, "--json"])
    summary = json.loads(as_json.stdout.splitlines()[-1])["summary"]
    assert summary["events"].get(stored, 0) >= 1, summary["events"]
    # A pipeline layer that did nothing new is not news (it reports every turn).
    assert summary["events"].get("layerreport", 0) < summary["turns"], summary["events"]
    shown = runner.invoke(app, args).stdout
    assert "0 checkpoint(s), 0 reference(s)" not in shown
    assert stored in " ".join(shown.split())


def test_the_replay_plot_marks_only_what_happened(tmp_path: Path) -> None:
    # covers: OBS-2
    from comal.cli._replay import plot_marks

    args = ["--ledger", str(tmp_path / "r.db"), "replay", str(_ctf()), "--engine", "dag",
            "--context-window", "16000", "--json"]  # fmt: skip
    as_json = runner.invoke(app, args)
    turns = [json.loads(line) for line in as_json.stdout.splitlines()[:-1]]
    marks = plot_marks(turns)
    assert set(marks) == {"dag_summarized"} | ({"dag_condensed"} & set(marks))
    assert all(marks.values())


def test_context_history_is_never_more_than_the_whole(tmp_path: Path) -> None:
    # covers: TOK-4, LIM-7
    db = tmp_path / "c.db"
    assert runner.invoke(app, ["--ledger", str(db), "import", str(_ctf())]).exit_code == 0
    session = json.loads(runner.invoke(app, ["--ledger", str(db), "sessions", "--json"]).stdout)
    sid = session[0]["session"]
    args = ["--ledger", str(db), "context", sid, "--context-window", "200000"]
    report: dict[str, Any] = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert report["stage"] == "verbatim" and report["history"] == report["history_full"]
    assert report["input"] == (
        report["system"] + report["tools"] + report["history"] + report["reply_priming"]
    )
    table = runner.invoke(app, args).stdout
    full = f"{report['history_full']:,}"
    assert f"{full} of {full}" in table
