"""The command line is a projection of the one registry (OPS-1): every operation `comal tools
--surface cli` lists has a command that runs it, judged and receipted on the cli surface; and
`comal summaries --show ID` prints a summary's text."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.cli import app
from comal.ops import HUMAN_CONTROLS
from conftest import corpus_dir

runner = CliRunner()

# The commands of their own; every other operation runs through `comal call`.
OWN_COMMAND = {"context": "context", "state": "state", "compact": "compact"}


def _cli(db: Path, *args: str, code: int = 0) -> str:
    result = runner.invoke(app, ["--ledger", str(db), *args])
    assert result.exit_code == code, result.output
    return result.stdout


def _example_args(entry: int, summary: int, url: str) -> dict[str, dict[str, Any]]:
    return {
        "Read": {"path": "a.txt"},
        "Write": {"path": "b.txt", "content": "new\n"},
        "Edit": {"path": "a.txt", "old_string": "hello", "new_string": "hi"},
        "Glob": {"pattern": "*.txt"},
        "Grep": {"pattern": "hi"},
        "Bash": {"command": "true"},
        "EvidenceRead": {"entry": entry},
        "session_search": {"query": "flag"},
        "ctx_search": {"query": "flag"},
        "ctx_inspect": {"summary": summary},
        "ctx_expand": {"summary": summary},
        "cost": {},
        "memory_search": {"query": "flag"},
        # The board, as the agent's session registry holds it (``comal tools`` lists it).
        "BoardAdd": {"text": "the flag is set"},
        "BoardList": {},
        "BoardUpdate": {"item": 1, "status": "in_progress"},
        "WebFetch": {"url": url},
    }


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str, Path]]:
    db, ws = tmp_path / "c.db", tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    # A page WebFetch may read: the operator allows this machine's server by name.
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(ws))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("COMAL_TEST_PAGE", f"http://127.0.0.1:{server.server_address[1]}/a.txt")
    local = {"allowed_hosts": ["127.0.0.1"], "private_hosts": ["127.0.0.1"]}
    config = tmp_path / "config.json"  # Bash runs here even where there is no OS sandbox
    config.write_text(
        json.dumps(
            {"sandbox": {"allow_unsandboxed": True}, "plugin_settings": {"web_fetch": local}}
        )
    )
    monkeypatch.setenv("COMAL_CONFIG", str(config))
    transcript = corpus_dir() / "swe-agent" / "ctf_web_i_got_id_demo.traj"
    _cli(db, "import", str(transcript))
    sid = json.loads(_cli(db, "sessions", "--json"))[0]["session"]
    try:
        yield db, sid, ws
    finally:
        server.shutdown()
        server.server_close()


def test_every_operation_on_the_cli_surface_has_a_command_that_runs_it(
    session: tuple[Path, str, Path],
) -> None:
    # covers: OPS-1, OPS-3, OPS-6, DAG-7
    db, sid, ws = session
    listed = json.loads(_cli(db, "tools", "--surface", "cli", "--format", "openai", "--json"))
    names = [t["function"]["name"] for t in listed]
    assert not set(names) & HUMAN_CONTROLS  # a CLI process holds no live session to control
    assert {"context", "state", "compact", "ctx_expand"} <= set(names)
    made = json.loads(_cli(db, "compact", sid, "--engine", "dag", "--json"))["made"]
    summary = next(m["id"] for m in made if "id" in m) if made else 1
    rows = json.loads(_cli(db, "show", sid, "--json"))
    entry = next(r["entry"] for r in rows if r["role"] == "tool")
    examples = _example_args(entry, summary, os.environ["COMAL_TEST_PAGE"])
    for name in names:
        if name in OWN_COMMAND:
            _cli(db, OWN_COMMAND[name], sid, "--json")
            continue
        assert name in examples, f"{name} is on the cli surface: give it a command, or an example"
        out = _cli(db, "call", sid, name, json.dumps(examples[name]), "--mode", "trusted",
                   "--workspace", str(ws), "--json")  # fmt: skip
        assert json.loads(out)["status"] == "ok", out
    receipts = json.loads(_cli(db, "receipts", sid, "--json"))
    ran = {r["operation"] for r in receipts if r["surface"] == "cli" and r["status"] == "ok"}
    assert ran == set(names)
    assert (ws / "b.txt").read_text() == "new\n" and (ws / "a.txt").read_text() == "hi\n"


def test_call_is_judged_like_any_call(session: tuple[Path, str, Path]) -> None:
    # covers: OPS-2, OPS-3, OPS-6
    db, sid, ws = session
    write = json.dumps({"path": "x.txt", "content": "no\n"})
    denied = _cli(db, "call", sid, "Write", write, "--mode", "read-only", "--workspace", str(ws),
                  "--json", code=1)  # fmt: skip
    assert json.loads(denied)["status"] == "denied" and not (ws / "x.txt").exists()
    control = _cli(db, "call", sid, "mode", '{"mode": "trusted"}', "--json", code=1)
    assert json.loads(control)["status"] == "denied"
    bad = runner.invoke(app, ["--ledger", str(db), "call", sid, "Read", "{oops", "--json"])
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["code"] == "USER_ERROR"


def test_summaries_show_prints_a_summarys_text(session: tuple[Path, str, Path]) -> None:
    # covers: CFG-1
    db, sid, _ws = session
    _cli(db, "compact", sid, "--engine", "dag")
    (first, *_) = json.loads(_cli(db, "summaries", sid, "--json"))
    shown = json.loads(_cli(db, "summaries", sid, "--show", str(first["id"]), "--json"))
    assert shown["text"] and shown["id"] == first["id"]
    text = _cli(db, "summaries", sid, "--show", str(first["id"]))
    assert f"summary {first['id']}" in text and shown["text"].splitlines()[0][:40] in text
    missing = runner.invoke(app, ["--ledger", str(db), "summaries", sid, "--show", "999"])
    assert missing.exit_code == 2 and "no summary 999" in missing.output
