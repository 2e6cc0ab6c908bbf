"""Surfaces that tell the truth (issue 10) and hostile text on terminals (issue 9 §4, §6, §7):
one regression test per item seen."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from _agent_support import reply, text, tool, write_script
from comal.agent import Config, Flags, Runtime
from comal.cli import _common, app
from comal.cli._agent import run_prompt
from comal.context import get_engine
from comal.ledger import open_ledger
from comal.messages import Message, ToolCall
from comal.ops import Actor, ApprovalRequest, Effect
from comal.providers import ModelRequest, anthropic_params
from comal.safe_text import safe, safe_command
from comal.testing import FunctionProvider
from conftest import corpus_dir

runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.db"
    monkeypatch.setattr(_common.STATE, "ledger_path", str(path))
    monkeypatch.setenv("COMAL_LEDGER", str(path))  # the CLI's root option reads it
    return path


def _cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return data


# -- wrong or silent behaviour ---------------------------------------------------------------


def test_a_failed_start_leaves_no_session(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=tmp_path)
    assert run_prompt("hello", flags, resume=None, as_json=True) == 2
    assert _json(capsys)["error"]["code"] == "PROVIDER_MISSING_KEY"
    missing = Flags(model=f"script:{tmp_path / 'nope.jsonl'}", workspace=tmp_path)
    assert run_prompt("hello", missing, resume=None, as_json=True) == 2
    error = _json(capsys)["error"]
    assert error["code"] == "INPUT_ERROR" and "nope.jsonl" in error["message"]
    led = open_ledger(db)
    assert led.sessions() == []  # nothing was created by either failed start
    led.close()


def test_retrying_a_failed_turn_stores_the_prompt_once(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-1
    script = write_script(tmp_path / "s.jsonl", [])  # the first turn fails: no reply
    flags = Flags(model=f"script:{script}", workspace=tmp_path, mode="trusted")
    assert run_prompt("do it", flags, resume=None, as_json=True) == 2
    session = _json(capsys)["session"]
    write_script(script, [reply(text("done"))])
    assert run_prompt("do it", flags, resume=session, as_json=True) == 0
    led = open_ledger(db)
    scope = led.resolve(session)
    users = [e for e in led.entries(scope) if e.role == "user"]
    assert len(users) == 1  # the retried prompt was answered, not stored twice
    led.close()


def test_resume_works_in_the_sessions_workspace_and_keeps_the_new_mode(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: RES-6
    home = tmp_path / "project"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = write_script(
        tmp_path / "s.jsonl",
        [
            reply(tool("w1", "Write", path="a.txt", content="one\n")),
            reply(text("first")),
            reply(tool("w2", "Write", path="b.txt", content="two\n")),
            reply(text("second")),
        ],
    )
    flags = Flags(model=f"script:{script}", workspace=home, mode="trusted")
    assert run_prompt("write a", flags, resume=None, as_json=True) == 0
    session = _json(capsys)["session"]
    monkeypatch.chdir(elsewhere)
    # A new process, another directory, no --workspace: the session's own workspace, and the
    # mode of this process (read-only), which refuses the write.
    again = Flags(mode="read-only")
    assert run_prompt("write b", again, resume=session, as_json=True) == 6  # denied (DRV-4)
    assert (home / "a.txt").exists() and not (elsewhere / "a.txt").exists()
    assert not (home / "b.txt").exists() and not (elsewhere / "b.txt").exists()
    led = open_ledger(db)
    denied = [
        r for r in led.records(led.resolve(session), "receipt") if r.body["status"] == "denied"
    ]
    assert denied and "read-only" in json.dumps(denied[-1].body)
    led.close()


def test_an_unknown_model_says_its_window_is_the_default(db: Path, tmp_path: Path) -> None:
    # covers: TOK-3
    led = open_ledger(db)
    scope = led.create_session("local", "comal")
    led.append(scope, [Message.user("hi")])
    led.close()
    result = _cli("context", scope.session, "--model", "foo:bar", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["window"] == 45_000 and "not in the catalog" in report["window_note"]


def test_a_format_mismatch_is_an_error(db: Path) -> None:
    codex = next((corpus_dir() / "codex").glob("*"))
    result = _cli("import", "-f", "claude-code", str(codex), "--json")
    assert result.exit_code == 2, result.output
    assert "IMPORT_FORMAT" in result.output


def test_replay_reproduces_what_the_agent_sent(db: Path, tmp_path: Path) -> None:
    # covers: LIM-1, LIM-2, LIM-3
    sent: list[dict[str, Any]] = []
    steps = 14

    def model(request: ModelRequest) -> dict[str, Any]:
        sent.append(anthropic_params(request))
        n = len(sent)
        if n > steps:
            return reply(text("done"))
        return reply(text(f"step {n}"), tool(f"c{n}", "Bash", command=f"seq {n * 700}"))

    (tmp_path / "ws").mkdir()
    flags = Flags(
        model="anthropic:claude-sonnet-4-6",
        context_window=8_000,
        workspace=tmp_path / "ws",
        mode="trusted",
    )
    led = open_ledger(db)
    rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(model))
    result = rt.run("count a lot")
    assert result.status == "finished", result.error
    assert rt.scope is not None and led.checkpoints(rt.scope)  # the engine had to work
    led.close()
    dump = tmp_path / "dump"
    out = _cli(
        "replay", rt.scope.session, "--model", "anthropic:claude-sonnet-4-6",
        "--context-window", "8000", "--dump", str(dump), "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    dumped = [json.loads(p.read_text()) for p in sorted(dump.glob("turn-*.json"))]
    assert len(dumped) == len(sent)
    for live, replayed in zip(sent, dumped, strict=True):
        for key in ("system", "tools", "messages"):
            assert replayed[key] == live[key]


# -- hostile text on terminals -------------------------------------------------------------


def test_control_and_bidi_characters_are_shown_escaped(db: Path) -> None:
    hostile = "ok\x1b[2J\x1b]52;c;ZXZpbA==\x07 done \u202etxt.exe\r"
    assert safe(hostile) == "ok\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07 done \\u202etxt.exe\\x0d"
    assert safe("tabs\tand\nlines stay") == "tabs\tand\nlines stay"
    led = open_ledger(db)
    scope = led.create_session("local", "comal")
    call = ToolCall("c1", "Bash", json.dumps({"command": "cat x"}))
    led.append(scope, [Message.user("look")])
    led.append(scope, [Message.assistant("", call), Message.tool("c1", hostile)])
    led.close()
    for args in (("show", scope.session), ("export", scope.session, "-f", "markdown")):
        result = _cli(*args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
        assert "\\x1b" in result.stdout
    exported = json.loads(_cli("export", scope.session).stdout)
    assert exported[-1]["content"] == hostile  # JSON keeps the exact bytes, escaped by JSON


def test_the_approval_prompt_shows_the_exact_command() -> None:
    request = ApprovalRequest(
        "c1", "Bash", Actor.subagent("s", "p"), "model",
        {"command": "echo safe \u202e#lmth.exe && rm -rf ~"}, "d", "mode:ask", "",
        (Effect("exec"),),
    )  # fmt: skip
    shown = safe_command(request.describe())
    assert "\u202e" not in shown and "\\u202e" in shown and "control or invisible" in shown


# -- bad configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--context-window", str(10**30)), {}),
        ((), {"COMAL_CONTEXT_WINDOW": str(10**30)}),
    ],
)
def test_absurd_windows_are_coded_errors(
    db: Path, args: tuple[str, ...], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    led = open_ledger(db)
    scope = led.create_session("local", "comal")
    led.append(scope, [Message.user("hi")])
    led.close()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = _cli("context", scope.session, *args, "--json")
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["code"] == "INPUT_ERROR"


@pytest.mark.parametrize(
    ("limits", "key"),
    [
        ({"timeouts": {"Bash": -1}}, "limits.timeouts.Bash"),
        ({"timeouts": {"Bash": 0}}, "limits.timeouts.Bash"),
        ({"timeouts": {"Bash": float("nan")}}, "limits.timeouts.Bash"),
        ({"default_timeout": 900, "max_timeout": 600}, "limits"),
    ],
)
def test_bad_limits_name_file_and_key(tmp_path: Path, limits: dict[str, Any], key: str) -> None:
    # covers: CFG-1
    from comal.agent import load_config
    from comal.errors import InputError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"limits": limits}))
    with pytest.raises(InputError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value)
    assert info.value.field is not None and info.value.field.startswith(key)


def test_duplicate_call_ids_are_refused_before_anything_runs(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # covers: OUT-2, LIM-4
    script = write_script(
        tmp_path / "s.jsonl",
        [
            reply(
                tool("same", "Write", path="a.txt", content="a\n"),
                tool("same", "Write", path="b.txt", content="b\n"),
            ),
            reply(text("sorry")),
        ],
    )
    flags = Flags(model=f"script:{script}", workspace=tmp_path, mode="trusted")
    assert run_prompt("write", flags, resume=None, as_json=True) == 2
    data = _json(capsys)
    assert data["error"]["code"] == "DUPLICATE_CALL_IDS"
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert _cli("verify").exit_code == 0
    assert run_prompt(None, flags, resume=data["session"], as_json=True) == 0


def test_the_engine_seam_reaches_every_surface(db: Path) -> None:
    # covers: CFG-2
    led = open_ledger(db)
    scope = led.create_session("local", "comal")
    led.append(scope, [Message.user("hi")])
    led.close()
    for args in (
        ("context", scope.session, "--engine", "magic"),
        ("compact", scope.session, "--engine", "magic"),
        ("replay", scope.session, "--engine", "magic"),
    ):
        result = _cli(*args, "--json")
        assert result.exit_code == 2, (args, result.output)
        assert "limit" in json.loads(result.stdout)["error"]["message"]
    assert get_engine("limit").name == "limit"
    assert os.environ.get("COMAL_ENGINE") is None


def test_engine_actions_become_events_once_and_metrics_travel_with_requests(
    db: Path, tmp_path: Path
) -> None:
    # covers: OBS-1, OBS-2
    def model(request: ModelRequest) -> dict[str, Any]:
        n = len(provider.calls)
        if n > 45:
            return reply(text("done"))
        return reply(text(f"step {n}"), tool(f"c{n}", "Bash", command="seq 400"))

    provider = FunctionProvider(model)
    (tmp_path / "ws").mkdir()
    flags = Flags(
        model="anthropic:claude-sonnet-4-6",
        context_window=12_000,
        workspace=tmp_path / "ws",
        mode="trusted",
    )
    led = open_ledger(db)
    rt = Runtime.open(led, flags, config=Config(), provider=provider)
    assert rt.run("count").status == "finished"
    scope = rt.need_scope()
    events = led.records(scope, "event")
    kinds = {e.kind for e in events}
    assert {"checkpointed", "referenced"} <= kinds, kinds
    announced = [i for e in events if e.kind == "referenced" for i in e.body["entries"]]
    assert len(announced) == len(set(announced))  # sticky references are announced once
    assert len([e for e in events if e.kind == "checkpointed"]) == len(led.checkpoints(scope))
    metrics = [r.meta["metrics"] for r in led.requests(scope)]
    assert all("tokensLoaded" in m and "layerCount" in m for m in metrics)
    led.close()
    listed = _cli("events", scope.session, "--kind", "checkpointed", "--json")
    assert listed.exit_code == 0, listed.output
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    assert lines and all(line["kind"] == "checkpointed" for line in lines)


def test_every_engine_of_the_registry_runs_the_agent(db: Path, tmp_path: Path) -> None:
    # covers: CFG-2, PIP-1, DAG-7
    from comal.context import ENGINES

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "AGENTS.md").write_text("Always run the tests before answering.\n")
    for name in ENGINES:

        def model(request: ModelRequest) -> dict[str, Any]:
            return reply(text("ok"))

        led = open_ledger(db)
        flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=ws, engine=name)
        rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(model))
        assert rt.settings().engine_name == name
        assert rt.run("hi").status == "finished"
        # The instructions travel in the system prompt, which every engine sends (DRV-1).
        assert "run the tests" in rt.proposer().system_text
        offered = {op.name for op in rt.proposer().catalog.operations}
        for other in ENGINES.values():
            for tool_name in other.model_tools:
                # A recall tool is offered exactly while its engine runs.
                assert (tool_name in offered) == (tool_name in ENGINES[name].model_tools)
        led.close()


def test_rename_and_rm_with_a_tombstone(db: Path) -> None:
    led = open_ledger(db)
    scope = led.create_session("local", "comal", title="old", messages=[Message.user("hi")])
    led.close()
    assert _cli("rename", scope.session, "new title").exit_code == 0
    shown = json.loads(_cli("sessions", "--json").stdout)
    assert shown[0]["title"] == "new title"
    refused = runner.invoke(app, ["rm", scope.session], input="n\n")
    assert refused.exit_code == 0 and "nothing removed" in refused.stdout  # no is no error
    assert len(json.loads(_cli("sessions", "--json").stdout)) == 1
    gone = _cli("rm", scope.session, "--yes", "--json")
    assert gone.exit_code == 0, gone.output
    assert json.loads(gone.stdout)["entries"] == 1
    assert json.loads(_cli("sessions", "--json").stdout) == []
    verified = _cli("verify", "--json")
    assert verified.exit_code == 0 and json.loads(verified.stdout)["ok"]


def test_a_postgres_url_never_becomes_a_file_and_its_password_never_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "postgresql://me:s3cret-pw@127.0.0.1:9/nowhere"
    for args in (("--ledger", url, "sessions", "--json"), ("sessions", "--json")):
        monkeypatch.setenv("COMAL_LEDGER", url)
        result = runner.invoke(app, list(args))
        assert result.exit_code == 2, result.output
        assert "s3cret-pw" not in result.output
        assert json.loads(result.stdout)["error"]["code"].startswith("LEDGER_")
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the URL


@pytest.mark.skipif(
    not os.environ.get("COMAL_TEST_PG"),
    reason='COMAL_TEST_PG not set; run `eval "$(.ci/run postgres)"` to test PostgreSQL',
)
def test_a_postgres_session_lock_holds_across_connections() -> None:
    # covers: RES-2, LED-4
    import uuid

    from comal.agent import SessionLocked, lock_session

    led = open_ledger(os.environ["COMAL_TEST_PG"], schema=f"lock_{uuid.uuid4().hex[:8]}")
    scope = led.create_session("t", "a", messages=[Message.user("hi")])
    first = lock_session(led, scope)
    with pytest.raises(SessionLocked):
        lock_session(led, scope)
    first.release()
    again = lock_session(led, scope)  # released: free to take
    again.release()
    led.close()


def test_deleting_a_dag_session_removes_its_summaries_and_verifies(
    db: Path, tmp_path: Path
) -> None:
    # covers: LED-1, DAG-1
    def model(request: ModelRequest) -> dict[str, Any]:
        n = len(provider.calls)
        if n > 40:
            return reply(text("done"))
        return reply(text(f"step {n}"), tool(f"c{n}", "Bash", command="seq 300"))

    provider = FunctionProvider(model)
    (tmp_path / "ws").mkdir()
    flags = Flags(
        model="anthropic:claude-sonnet-4-6", context_window=16_000, workspace=tmp_path / "ws",
        mode="trusted",
    )  # fmt: skip
    config = Config(engine="dag", engine_settings={"defer_compaction": False})
    led = open_ledger(db)
    rt = Runtime.open(led, flags, config=config, provider=provider)
    assert rt.run("go").status == "finished"
    scope = rt.need_scope()
    assert led.summaries(scope)  # the engine summarized
    led.close()
    gone = _cli("rm", scope.session, "--yes", "--json")
    assert gone.exit_code == 0, gone.output
    rows = json.loads(gone.stdout)["rows"]
    assert rows["summaries"] > 0 and rows["summary_children"] >= 0
    assert _cli("verify").exit_code == 0


def test_a_house_that_does_not_hold_the_session_runs_nothing_with_effects(
    db: Path, tmp_path: Path
) -> None:
    # covers: OPS-3, RES-2
    from comal.ops import Actor

    ws = tmp_path / "ws"
    ws.mkdir()
    led = open_ledger(db)
    flags = Flags(model="anthropic:claude-sonnet-4-6", workspace=ws, mode="trusted")
    rt = Runtime.open(led, flags, config=Config(), provider=FunctionProvider(lambda r: {}))
    rt.start("hello")
    house = rt.house()  # built outside a run: this process does not hold the session
    write = ToolCall("w1", "Write", json.dumps({"path": "x.txt", "content": "no\n"}))
    outcome = house.run(write, Actor.user("ana"), surface="cli")
    assert outcome.result.is_error and "SESSION_NOT_HELD" in json.dumps(
        dict(outcome.receipt.observations)
    )
    assert not (ws / "x.txt").exists()
    read = ToolCall("g1", "Glob", json.dumps({"pattern": "*"}))
    assert not house.run(read, Actor.user("ana"), surface="cli").result.is_error  # reads run
    led.close()


def test_flags_show_no_value_and_ledger_goes_anywhere(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from comal.cli import main

    with pytest.raises(SystemExit):
        main(["rm", "--help"])
    shown = capsys.readouterr().out
    line = next(x for x in shown.splitlines() if "--yes" in x)
    assert "<bool>" not in line
    led = open_ledger(db)
    led.create_session("local", "comal", messages=[Message.user("hi")])
    led.close()
    with pytest.raises(SystemExit) as done:
        main(["sessions", "--ledger", str(db), "--json"])
    assert done.value.code in (0, None)
    assert len(json.loads(capsys.readouterr().out)) == 1
