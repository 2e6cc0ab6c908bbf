"""OBS-2 on every surface: every stand-in the engine stores is an event, written in the same
transaction (``comal compact`` and ``/compact`` run the executor table's handlers), and a proxy
session that referenced and checkpointed lists those events in ``comal events``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from comal.cli import app
from comal.ledger import LedgerBackend, open_ledger
from conftest import corpus_dir

runner = CliRunner()


def _cli(db: Path, *args: str) -> str:
    result = runner.invoke(app, ["--ledger", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _imported(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "e.db"
    transcript = corpus_dir() / "swe-agent" / "ctf_web_i_got_id_demo.traj"
    _cli(db, "import", str(transcript))
    session = json.loads(_cli(db, "sessions", "--json"))[0]["session"]
    return db, session


def _events(db: Path, session: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _cli(db, "events", session, "--json").splitlines()]


@pytest.mark.parametrize(
    ("engine", "kind"), [("limit", "checkpointed"), ("pipeline", "pipeline_summarized")]
)
def test_compact_stores_its_stand_in_with_an_event(tmp_path: Path, engine: str, kind: str) -> None:
    # covers: OBS-2, LIM-7
    db, session = _imported(tmp_path)
    made = json.loads(_cli(db, "compact", session, "--engine", engine, "--json"))["checkpoint"]
    assert made is not None, "the session is long enough to compact"
    (event,) = [e for e in _events(db, session) if e["kind"] == kind]
    with open_ledger(db) as led:
        (stored,) = led.checkpoints(led.resolve(session))
    assert event["body"]["checkpoint"] == stored.id
    assert (event["body"]["first_seq"], event["body"]["last_seq"]) == (
        stored.first_seq,
        stored.last_seq,
    )


def test_the_event_and_the_stand_in_are_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: OBS-2, LED-1
    from comal.ledger import SQLiteLedger

    db, session = _imported(tmp_path)

    def fail(self: LedgerBackend, *args: Any, **kw: Any) -> Any:
        raise OSError("disk full (a test)")

    # Only this patch is undone after: the isolated user dirs (and the ledger's key) stay.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SQLiteLedger, "add_record", fail)
        result = runner.invoke(app, ["--ledger", str(db), "compact", session, "--json"])
    assert result.exit_code != 0
    with open_ledger(db) as led:
        assert led.checkpoints(led.resolve(session)) == []  # no stand-in without its event


@pytest.mark.parametrize(
    ("engine", "stand_in", "action"),
    [("limit", "checkpointed", "referenced"), ("pipeline", "pipeline_summarized", None)],
)
def test_a_proxy_session_lists_its_references_and_checkpoints(
    tmp_path: Path, engine: str, stand_in: str, action: str | None
) -> None:
    # covers: OBS-2, SRF-2
    from serve._support import proxy

    turns = 24
    script: list[dict[str, Any]] = [
        {
            "content": [{"type": "tool_use", "id": f"c{n}", "name": "run", "input": {"n": n}}],
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }
        for n in range(turns)
    ]
    script.append({"content": "done", "usage": {"input_tokens": 10, "output_tokens": 2}})
    with proxy(tmp_path, script, context_window=6_000, engine=engine) as px:
        client = px.openai()
        tools = [{"type": "function", "function": {"name": "run", "parameters": {}}}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for turn in range(turns + 1):
            reply = client.chat.completions.create(
                model="gpt-4o",
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            (call,) = message.tool_calls
            output = "\n".join(f"{turn}:{i} some output line" for i in range(60))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        (info,) = px.ledger.sessions()
        checkpoints = px.ledger.checkpoints(info.scope)
    assert checkpoints, "the small window must make the engine checkpoint"
    listed = _events(tmp_path / "ledger.db", info.id)
    kinds = [e["kind"] for e in listed]
    assert kinds.count(stand_in) == len(checkpoints)
    assert action is None or action in kinds
