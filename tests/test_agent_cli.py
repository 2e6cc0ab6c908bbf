"""``comal -p`` / ``--resume`` through :func:`run_prompt`, and the configuration (CFG-1, CFG-2)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from _agent_support import TASK, TASK_ANSWER, TASK_FILES, reply, text, tool, write_script
from comal.agent import (
    DEFAULT_SYSTEM,
    OPERATOR_ONLY,
    Flags,
    SessionLock,
    SpendCaps,
    config_path,
    load_config,
    lock_path,
    policy_from_config,
    settings_from_config,
)
from comal.cli import _common
from comal.cli._agent import run_prompt
from comal.errors import InputError
from comal.ledger import open_ledger
from comal.messages import ToolCall
from comal.ops import Actor, House, Workspace, default_registry, human_controls, unguarded


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def config_file(data: dict[str, Any]) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def cli(prompt: str | None, ws: Path, **kw: Any) -> int:
    resume = kw.pop("resume", None)
    as_json = kw.pop("as_json", True)
    args: dict[str, Any] = {"mode": "trusted", "workspace": ws} | kw
    for key in ("allow", "deny"):
        args[key] = tuple(args.get(key, ()))
    return run_prompt(prompt, Flags(**args), resume=resume, as_json=as_json)


def output(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = capsys.readouterr().out.strip().splitlines()
    data: dict[str, Any] = json.loads(out[-1])
    return data


def test_prompt_runs_a_scripted_task_and_prints_json(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-1, OPS-3
    script = write_script(tmp_path / "s.jsonl", TASK)
    code = cli("Do the task.", ws, model=f"script:{script}")
    data = output(capsys)
    assert code == 0
    assert set(data) == {"session", "status", "answer", "turns", "receipts", "usage"}
    assert (data["status"], data["answer"], data["turns"]) == ("finished", TASK_ANSWER, 5)
    assert data["usage"]["requests"] == 6 and data["usage"]["new_input"] == 1200
    assert {r["call_id"] for r in data["receipts"]} == {"w1", "b1", "e1", "w2", "e2", "b2"}
    assert {p.name: p.read_text() for p in ws.iterdir()} == TASK_FILES
    # Resuming a finished session answers from the ledger and calls nothing (RES-1).
    assert cli(None, ws, resume=data["session"][:8]) == 0
    again = output(capsys)
    assert (again["status"], again["answer"], again["turns"]) == ("finished", TASK_ANSWER, 0)
    led = open_ledger(db)
    assert len(led.requests(led.resolve(data["session"]))) == 6
    led.close()


def test_text_mode_prints_the_answer_on_stdout(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(tmp_path / "s.jsonl", [reply(text("Hello there."))])
    assert cli("hi", ws, model=f"script:{script}", as_json=False) == 0
    captured = capsys.readouterr()
    assert captured.out == "Hello there.\n"
    assert "session" in captured.err  # progress goes to stderr


def test_a_script_that_runs_out_is_a_coded_error_and_resume_continues_it(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-1
    script = tmp_path / "s.jsonl"
    write_script(script, [reply(tool("b", "Bash", command="true"))])
    assert cli("go", ws, model=f"script:{script}") == 2
    data = output(capsys)
    assert data["status"] == "error" and data["error"]["code"] == "SCRIPT_EXHAUSTED"
    assert "has 1 replies" in data["error"]["message"]
    write_script(script, [reply(tool("b", "Bash", command="true")), reply(text("resumed"))])
    # The model is remembered by the session; the script goes on at reply 2.
    assert cli(None, ws, resume=data["session"]) == 0
    assert output(capsys)["answer"] == "resumed"


def test_max_turns_exit_code(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-1
    script = write_script(tmp_path / "s.jsonl", TASK)
    assert cli("go", ws, model=f"script:{script}", max_turns=1) == 3
    assert output(capsys)["status"] == "max_turns"


def test_headless_ask_denies_and_says_so_and_flags_decide(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: OPS-2, OPS-7, CFG-1, DRV-4
    replies = [reply(tool("w", "Write", path="x.txt", content="x")), reply(text("ok"))]
    script = write_script(tmp_path / "s.jsonl", replies)
    # A headless run whose call was denied does not report success (DRV-4).
    assert cli("write", ws, model=f"script:{script}", mode="ask") == 6
    captured = capsys.readouterr()
    assert "without an approver" in captured.err
    data = json.loads(captured.out.splitlines()[-1])
    (receipt,) = data["receipts"]
    assert receipt["status"] == "denied"
    assert "no approver is attached (headless)" in receipt["judgment"]["reason"]
    assert not (ws / "x.txt").exists()
    assert cli("write", ws, model=f"script:{script}", mode="ask", allow=["Write(x.txt)"]) == 0
    assert output(capsys)["receipts"][0]["status"] == "ok" and (ws / "x.txt").exists()
    (ws / "x.txt").unlink()
    assert cli("write", ws, model=f"script:{script}", deny=["Write(*)"]) == 6
    assert output(capsys)["receipts"][0]["judgment"]["rule"] == "Write(*)"
    assert not (ws / "x.txt").exists()


def test_missing_model_and_locked_session_are_coded_errors(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-2
    assert cli("hi", ws) == 2
    assert output(capsys)["error"]["code"] == "USER_ERROR"
    script = write_script(tmp_path / "s.jsonl", [reply(text("one")), reply(text("two"))])
    assert cli("hi", ws, model=f"script:{script}") == 0
    session = output(capsys)["session"]
    with SessionLock(lock_path(db, session), session):
        assert cli("again", ws, resume=session) == 2
        data = output(capsys)
    assert data["error"]["code"] == "SESSION_LOCKED" and data["session"] == session
    assert cli("again", ws, resume=session) == 0


def test_operator_spend_cap_from_the_configuration(
    tmp_path: Path, db: Path, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: TOK-6, CFG-2
    config_file({"spend": {"execution": 1_000}})
    script = write_script(tmp_path / "s.jsonl", [reply(text("never"))])
    assert cli("hi", ws, model=f"script:{script}") == 2
    data = output(capsys)
    assert (
        data["error"]["code"] == "SPEND_CAP"
        and "execution cap of 1,000" in data["error"]["message"]
    )
    assert data["usage"]["requests"] == 0


def test_configuration_defaults_work() -> None:
    # covers: CFG-1
    config = load_config()
    settings = settings_from_config(config, "claude-sonnet-4-6")
    assert settings.system == DEFAULT_SYSTEM and settings.spend == SpendCaps()
    assert settings.max_turns == 50 and settings.checks == ()
    assert settings.window.source == "catalog:claude-sonnet-4-6"  # the model's own window
    # No file exists in the isolated configuration directory: JSON is the default either way
    # (YAML is only read when a config.yaml is there and PyYAML is installed).
    assert config_path().name == "config.json" and not config_path().exists()


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"context_window": 10}, "context_window"),
        ({"spend": {"hour": 5}}, "spend.hour"),
        ({"mode": "yolo"}, "mode"),
        ({"colour": "blue"}, "colour"),
        ({"engine_settings": {"target_ratio": 2}}, None),
        ({"allow": ["Bash(("]}, None),
    ],
)
def test_configuration_is_validated_with_ranges(data: dict[str, Any], field: str | None) -> None:
    # covers: CFG-1
    path = config_file(data)
    with pytest.raises(InputError) as caught:
        load_config()
    assert caught.value.path == str(path)
    if field is not None:
        assert caught.value.field == field


def test_precedence_defaults_file_env_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    # covers: CFG-1
    config_file({"mode": "read-only", "max_turns": 7, "context_window": 64_000})
    assert load_config().mode == "read-only"
    monkeypatch.setenv("COMAL_MODE", "trusted")
    monkeypatch.setenv("COMAL_MAX_TURNS", "9")
    config = load_config()
    assert (config.mode, config.max_turns) == ("trusted", 9)
    flagged = config.merged({"mode": "ask", "max_turns": None})
    assert (flagged.mode, flagged.max_turns) == ("ask", 9)
    settings = settings_from_config(flagged, "claude-sonnet-4-6", context_window=32_000)
    assert settings.window.window == 32_000  # the minimum of model, file and flag
    assert settings_from_config(flagged, "claude-sonnet-4-6").window.window == 64_000


def test_per_agent_engine_settings() -> None:
    # covers: CFG-1
    config_file(
        {
            "engine_settings": {"keep_recent_results": 4},
            "agents": {"reviewer": {"engine": {"keep_recent_results": 2}, "max_turns": 3}},
        }
    )
    config = load_config()
    reviewer = settings_from_config(config, "m", agent="reviewer")
    other = settings_from_config(config, "m")
    assert (reviewer.engine.keep_recent_results, reviewer.max_turns) == (2, 3)
    assert (other.engine.keep_recent_results, other.max_turns) == (4, 50)


def test_yaml_needs_pyyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # covers: CFG-1
    path = tmp_path / "config.yaml"
    path.write_text("mode: trusted\n")
    monkeypatch.setenv("COMAL_CONFIG", str(path))
    if importlib.util.find_spec("yaml") is None:
        with pytest.raises(InputError, match="PyYAML is not installed"):
            load_config()
    else:
        assert load_config().mode == "trusted"


def test_operator_settings_are_out_of_the_model_reach(tmp_path: Path) -> None:
    # covers: CFG-2, OPS-6
    root = tmp_path / "home"
    root.mkdir()
    conf = root / ".config" / "comal" / "config.json"
    conf.parent.mkdir(parents=True)
    conf.write_text("{}")
    workspace = Workspace(root)
    policy = policy_from_config(
        load_config(conf).merged({"mode": "trusted"}), workspace=workspace, protect=conf
    )
    led = open_ledger(tmp_path / "l.db")
    scope = led.create_session("t", "a")
    house = House.of(led, scope, default_registry(), policy, workspace=workspace, guard=unguarded)
    attempts = {
        "Write": {"path": ".config/comal/config.json", "content": '{"spend": {}}'},
        "Edit": {"path": ".config/comal/config.json", "old_string": "{", "new_string": "{ "},
        "Bash": {"command": f"echo '{{}}' > {conf}"},
    }
    for name, args in attempts.items():
        outcome = house.run(ToolCall(name, name, json.dumps(args)), Actor.user("u"))
        assert outcome.receipt.status == "denied", name
    assert conf.read_text() == "{}"
    assert (
        house.run(
            ToolCall("ok", "Write", json.dumps({"path": "notes.txt", "content": "x"})),
            Actor.user("u"),
        ).receipt.status
        == "ok"
    )
    settings = settings_from_config(load_config(conf), "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.spend = SpendCaps(execution=10**12)  # type: ignore[misc]
    model_ops = set(default_registry().catalog("model").names)
    assert not model_ops & {op.name for op in human_controls()}
    assert OPERATOR_ONLY >= {"context_window", "spend", "engine"}
    led.close()
