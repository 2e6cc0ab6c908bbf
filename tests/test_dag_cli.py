"""The dag engine's command-line contract: replay, compact, summaries, context, bench recall."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from comal.bench import run_context_bench
from comal.bench._recall import run_recall
from comal.cli import app
from conftest import corpus_dir

runner = CliRunner()


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _transcript() -> Path:
    return next(corpus_dir().glob("mini-swe-agent/deepseek-chat__django__django-15388*"))


def test_replay_with_the_dag_engine_keeps_the_replay_contract(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-6, OBS-1
    db, dump = tmp_path / "r.db", tmp_path / "dump"
    out = _run(
        "--ledger", str(db), "replay", str(_transcript()), "--engine", "dag",
        "--context-window", "16000", "--json", "--dump", str(dump),
    )  # fmt: skip
    lines = [json.loads(line) for line in out.splitlines()]
    turns, summary = lines[:-1], lines[-1]["summary"]
    assert all({"turn", "input_tokens", "full_tokens", "fits", "actions"} <= set(t) for t in turns)
    assert summary["engine"] == "dag" and all(t["fits"] for t in turns)
    assert summary["tokens_sent"] < summary["tokens_full"]
    texts = [(dump / f"turn-{t['turn']:04d}.json").read_text() for t in turns]
    assert any("[comal summary " in t and "trust=untrusted" in t for t in texts)
    again = _run(
        "--ledger", str(db), "replay", str(_transcript()), "--engine", "dag",
        "--context-window", "16000", "--json",
    )  # fmt: skip
    assert [json.loads(x)["input_tokens"] for x in again.splitlines()[:-1]] == [
        t["input_tokens"] for t in turns
    ]  # deterministic: summaries are made inline in a replay


def test_compact_summaries_and_context_with_the_dag_engine(tmp_path: Path) -> None:
    # covers: DAG-1, DAG-2, DAG-9, LIM-7
    db = tmp_path / "c.db"
    out = _run("--ledger", str(db), "import", str(_transcript()), "--json")
    imported = json.loads(out.splitlines()[0])  # one object per session, then a summary
    session = imported["session"] if "session" in imported else imported["sessions"][0]
    made = json.loads(
        _run(
            "--ledger",
            str(db),
            "compact",
            session[:8],
            "--engine",
            "dag",
            "--context-window",
            "16000",
            "--json",
        )
    )
    assert made["made"] and made["stopped"] in {"done", "blocked"}
    rows = json.loads(_run("--ledger", str(db), "summaries", session[:8], "--json"))
    keys = {"id", "depth", "kind", "sources", "descendant_count", "tokens", "time_range"}
    assert rows and all(keys | {"summarizer", "level"} <= set(r) for r in rows)
    assert {r["id"] for r in rows} >= {m["id"] for m in made["made"]}
    assert "summaries of" in _run("--ledger", str(db), "summaries", session[:8])
    report = json.loads(_run("--ledger", str(db), "context", session[:8], "--json"))
    dag = report["dag"]
    assert dag["summaries"] == len(rows) and dag["spend"]["breaker"] == "closed"
    assert dag["summarizer"] == "extractive" and "pending" in dag
    assert "dag engine" in _run("--ledger", str(db), "context", session[:8])
    assert json.loads(_run("--ledger", str(db), "verify", "--json"))["ok"]


def _locomo(path: Path) -> Path:
    turns = []
    for n in range(60):
        speaker = "Ann" if n % 2 == 0 else "Bo"
        text = f"turn {n} about topic{n % 9} and the {['lake', 'kiln', 'violin'][n % 3]}"
        if n == 7:
            text = "I adopted a greyhound called Pixel last spring"
        turns.append({"speaker": speaker, "dia_id": f"D1:{n + 1}", "text": text})
    doc = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1": turns,
        "qa": [
            {"question": "What is the name of the greyhound?", "evidence": ["D1:8"],
             "category": 1},
            {"question": "Which topic4 thing was mentioned?", "evidence": ["D1:5; D1:14"],
             "category": 2},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def test_bench_recall_json_contract(tmp_path: Path) -> None:
    # covers: DAG-7, LED-5
    a = _locomo(tmp_path / "a.json")
    b = _locomo(tmp_path / "b.json")
    out = json.loads(
        _run("bench", "recall", str(a), str(b), "--window", "2000", "--k", "1,5", "--json")
    )
    runs = out["runs"]
    assert {(r["transcript"], r["strategy"]) for r in runs} >= {
        ("a", "comal-limit"), ("a", "comal-dag"), ("a", "bm25"), ("all", "bm25"),
    }  # fmt: skip
    for r in runs:
        assert set(r) >= {"transcript", "strategy", "window", "items", "in_context", "recall_at"}
        assert set(r["recall_at"]) == {"1", "5"} and r["window"] == 2000
    dag = next(r for r in runs if r["transcript"] == "a" and r["strategy"] == "comal-dag")
    assert dag["items"] == 2 and dag["recall_at"]["1"] >= 0.5  # "greyhound" is found first
    assert next(r for r in runs if r["strategy"] == "bm25")["in_context"] is None
    rows = run_recall([a], window=200_000, ks=(1,))
    # All in context for the engines; the retrieval rows (bm25, memory_search's) have none.
    engines = [r for r in rows if r.strategy.startswith("comal-")]
    assert len(engines) == 2 and all(r.total.in_context == 2 for r in engines)


def test_bench_context_times_the_dag_engine_with_its_summaries(tmp_path: Path) -> None:
    # covers: OBS-1, DAG-1
    result = run_context_bench(
        entries=600, window=16_000, measure=10, engine="dag", workdir=tmp_path
    )
    assert result.summaries > 0 and result.turns == 10
