"""``comal memory add|list|search|forget`` as a person runs them: the real CLI in a subprocess,
over a ledger an agent wrote through ``comal -p`` (DRV-7, issue 32 item 9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _agent_support import reply, text, tool, write_script
from comal.ledger import open_ledger
from comal.messages import Message

SCOPE = ("--tenant", "local", "--agent", "comal")


def _comal(cwd: Path, db: Path, *args: str, code: int = 0) -> str:
    env = {**os.environ, "COLUMNS": "400"}
    run = subprocess.run(
        [sys.executable, "-m", "comal", "--ledger", str(db), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == code, run.stdout + run.stderr
    return run.stdout


def _json(cwd: Path, db: Path, *args: str, code: int = 0) -> Any:
    return json.loads(_comal(cwd, db, *args, "--json", code=code))


def test_the_issues_hello_txt_is_found_first_and_says_why(tmp_path: Path) -> None:
    # covers: DRV-7, MEM-2
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "ledger.db"
    script = write_script(tmp_path / "s.jsonl", [
        reply(tool("w1", "Write", path="hello.txt", content="hello, world\n")),
        reply(text("Wrote hello.txt.")),
    ])  # fmt: skip
    _comal(ws, db, "-p", "Write hello.txt", "--model", f"script:{script}", "--mode", "trusted")
    assert (ws / "hello.txt").read_text() == "hello, world\n"
    with open_ledger(db) as led:  # later sessions that say hello and name other .txt files
        for _ in range(8):
            led.create_session("local", "comal", messages=[
                Message.user("hello"), Message.assistant("hello! txt txt notes.txt readme.txt"),
            ])  # fmt: skip
    found = _json(ws, db, "memory", "search", "hello.txt", *SCOPE)["results"]
    # The issue: the hits did not mention hello.txt; the agent's Write and its result do.
    assert [("hello.txt" in r["text"]) for r in found[:2]] == [True, True]
    exact = [r for r in found if r["match"]["how"] == "exact"]
    assert exact and found[: len(exact)] == exact  # exact matches first
    assert all("«hello.txt»" in r["match"]["snippet"] for r in exact)
    assert all("hello.txt" in r["text"] for r in exact)  # each names hello.txt literally
    rest = [r["match"] for r in found[len(exact) :]]
    assert rest and all(m["how"] in ("phrase", "words") and m["words"] for m in rest)
    shown = _comal(ws, db, "memory", "search", "hello.txt", *SCOPE)
    first = shown.splitlines()[1]
    assert first.startswith("- [exact]") and "«hello.txt»" in first


def test_add_list_forget_then_search_through_the_cli(tmp_path: Path) -> None:
    # covers: DRV-7, MEM-2, LED-2
    db = tmp_path / "ledger.db"
    fact = "deploys go through scripts/ship.sh"
    said = _comal(tmp_path, db, "memory", "add", fact, *SCOPE)
    assert "remembered as memory 1: a note of agent 'comal' (tenant 'local')" in said
    assert "comal memory forget 1" in said
    again = _json(tmp_path, db, "memory", "add", fact, *SCOPE)
    assert (again["added"], again["memory"]["id"]) == (False, 1)  # not stored twice
    other = _json(tmp_path, db, "memory", "add", "the staging host is stg-2", *SCOPE)
    assert other["added"] and other["memory"]["kind"] == "note"
    # list: newest first, with kind and source; a page at a time.
    listed = _json(tmp_path, db, "memory", "list", *SCOPE)
    assert [m["id"] for m in listed["memories"]] == [2, 1] and listed["next"] is None
    assert {(m["kind"], m["source"], m["session"]) for m in listed["memories"]} == {
        ("note", listed["memories"][0]["source"], None)
    } and listed["memories"][0]["source"].startswith("user:")
    page = _json(tmp_path, db, "memory", "list", *SCOPE, "--limit", "1")
    assert [m["id"] for m in page["memories"]] == [2] and page["next"] == 2
    older = _json(tmp_path, db, "memory", "list", *SCOPE, "--before", "2")
    assert [m["id"] for m in older["memories"]] == [1]
    text_list = _comal(tmp_path, db, "memory", "list", *SCOPE)
    assert "note" in text_list and fact in text_list
    # search finds the note exactly; forget it, and neither search nor list shows it again.
    found = _json(tmp_path, db, "memory", "search", "ship.sh", *SCOPE)["results"]
    assert [(r["id"], r["match"]["how"]) for r in found] == [(1, "exact")]
    gone = _json(tmp_path, db, "memory", "forget", "1", *SCOPE, "--why", "moved to ship2")
    assert gone["new"] and gone["forgotten"]["why"] == "moved to ship2"
    assert _json(tmp_path, db, "memory", "forget", "1", *SCOPE)["new"] is False
    assert _json(tmp_path, db, "memory", "search", "ship.sh", *SCOPE)["results"] == []
    assert [m["id"] for m in _json(tmp_path, db, "memory", "list", *SCOPE)["memories"]] == [2]
    everything = _json(tmp_path, db, "memory", "list", *SCOPE, "--all")["memories"]
    assert [(m["id"], bool(m["forgotten"])) for m in everything] == [(2, False), (1, True)]
    assert "forgotten" in _comal(tmp_path, db, "memory", "list", *SCOPE, "--all")
    # Refusals are coded: another agent's id, no scope, a half scope.
    refused = _json(tmp_path, db, "memory", "forget", "2", "--tenant", "local", "--agent", "spy",
                    code=2)  # fmt: skip
    assert refused["error"]["code"] == "MEMORY_NOT_FOUND"
    for args in (("memory", "add", "x"), ("memory", "list", "--tenant", "local")):
        assert _json(tmp_path, db, *args, code=2)["error"]["code"] == "SCOPE_INCOMPLETE"
    assert _json(tmp_path, db, "verify")["ok"] is True
