"""A ledger target that names no ledger comal has is refused, wherever it comes from (issue 19,
item 7): ``sqlite:///tmp/a.db`` or ``mysql://x`` used to become a folder tree ``./sqlite:/tmp``
with an empty ledger in it. ``open_ledger``, both backends' constructors, ``--ledger``,
``COMAL_LEDGER`` and ``comal serve --ledger`` all go through the one parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from comal.ledger import (
    LedgerBadTarget,
    PostgresLedger,
    SQLiteLedger,
    describe_target,
    open_ledger,
    parse_target,
)

# (target, what the message must say to do): the clear spellings of the file an ambiguous
# sqlite:/// URL may mean, or the targets comal takes.
ACCEPTED_FORMS = "sqlite:////absolute/path.db, file:///absolute/path.db or postgresql://"
REFUSED = [
    (
        "sqlite:///tmp/comal-target-test/a.db",
        "pass the path itself (tmp/comal-target-test/a.db or /tmp/comal-target-test/a.db), or "
        "write sqlite:////tmp/comal-target-test/a.db",
    ),
    ("sqlite:///ledger.db", "(ledger.db or /ledger.db)"),
    ("sqlite:ledger.db", ACCEPTED_FORMS),
    ("file:ledger.db", ACCEPTED_FORMS),
    ("sqlite://", ACCEPTED_FORMS),
    ("file:///", ACCEPTED_FORMS),
    ("file://otherhost/tmp/comal-target-test/a.db", "another host (otherhost)"),
    ("sqlite:////tmp/comal-target-test/a.db?mode=ro", "no query"),
    ("mysql://me:s3cret@db.example/app", ACCEPTED_FORMS),
    ("https://ledger.example/x", "pass a file path"),
    ("redis+tls://h:6379", "pass a file path"),
]


@pytest.mark.parametrize(("target", "todo"), REFUSED)
def test_urls_comal_has_no_ledger_for_are_refused_and_make_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, todo: str
) -> None:
    # covers: LED-4
    monkeypatch.chdir(tmp_path)
    openings = [(lambda: open_ledger(target), todo), (lambda: SQLiteLedger(target), todo)]
    if target.lower().startswith("sqlite"):
        # A Path loses one of the slashes, never the scheme: still a URL, still refused.
        openings.append((lambda: open_ledger(Path(target)), ACCEPTED_FORMS))
    for opening, said in openings:
        with pytest.raises(LedgerBadTarget) as err:
            opening()
        assert err.value.code == "LEDGER_BAD_TARGET"
        assert said in str(err.value) and "s3cret" not in str(err.value), str(err.value)
    assert list(tmp_path.iterdir()) == []
    assert not Path("/tmp/comal-target-test").exists()


def test_the_message_names_the_target_without_its_password() -> None:
    # covers: LED-4
    assert describe_target("mysql://me:s3cret@db.example/app") == "mysql://me@db.example/app"
    assert describe_target("sqlite:a.db") == "sqlite:a.db"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////{dir}/l%20one.db",
        "SQLite3:////{dir}/l one.db",
        "file:///{dir}/l%20one.db",
        "file://localhost/{dir}/l one.db",
        "file:/{dir}/l one.db",
    ],
)
def test_urls_that_name_one_file_open_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    # covers: LED-4
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    target = url.format(dir=str(tmp_path / "d").lstrip("/"))
    assert parse_target(target).value == str(tmp_path / "d" / "l one.db")
    with open_ledger(target) as led:
        sid = led.create_session("t", "a").session
        assert isinstance(led, SQLiteLedger) and led.path == str(tmp_path / "d" / "l one.db")
    with SQLiteLedger(target, create=False) as led:
        assert [s.id for s in led.sessions()] == [sid]
    # Beside it only its lock directory (the writer gate's file): "l one.db.locks/.writers".
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files[0] == "d/l one.db" and all(f.startswith("d/l one.db") for f in files)
    assert [p.name for p in tmp_path.iterdir()] == ["d"]


def test_sqlite_memory_url_is_an_in_memory_ledger() -> None:
    # covers: LED-4
    assert parse_target("sqlite:///:memory:").value == ":memory:"


@pytest.mark.parametrize("path", ["a:b.db", "C:/ledger.db", "ledger:2024.db", "./x/l.db"])
def test_paths_with_a_colon_are_still_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    # covers: LED-4
    monkeypatch.chdir(tmp_path)
    assert parse_target(path).kind == "sqlite"
    with open_ledger(path) as led:
        led.create_session("t", "a")
    assert (tmp_path / path).is_file()


def test_a_postgres_url_is_not_an_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: LED-4
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerBadTarget, match="open it with open_ledger"):
        SQLiteLedger("postgresql://u:pw@127.0.0.1:1/x")
    with pytest.raises(LedgerBadTarget, match="not a PostgreSQL URL"):
        PostgresLedger("ledger.db")
    assert list(tmp_path.iterdir()) == []


TRANSCRIPT = '{"messages": [{"role": "user", "content": "hi"}]}'


def _comal(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    run = subprocess.run(
        [sys.executable, "-m", "comal", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return run.returncode, run.stdout + run.stderr


def test_every_command_line_entry_point_refuses_a_wrong_target(tmp_path: Path) -> None:
    # covers: LED-4
    transcript = tmp_path.parent / f"{tmp_path.name}-t.jsonl"
    transcript.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    target = "sqlite:///ledger-target-test.db"
    runs = {
        "--ledger": _comal(tmp_path, "--ledger", target, "import", str(transcript), "--json"),
        "COMAL_LEDGER": _comal(
            tmp_path, "import", str(transcript), "--json", env={"COMAL_LEDGER": target}
        ),
        "sessions": _comal(tmp_path, "sessions", env={"COMAL_LEDGER": "mysql://u:s3cret@h/x"}),
        "agent --ledger": _comal(
            tmp_path, "-p", "hi", "--model", "script:/nonexistent", "--ledger", target, "--json"
        ),
        "serve --ledger": _comal(tmp_path, "serve", "--port", "1", "--ledger", target),
    }
    for where, (code, said) in runs.items():
        assert code == 2 and "LEDGER_BAD_TARGET" in said, (where, said)
        assert "Traceback" not in said and "s3cret" not in said, (where, said)
    assert list(tmp_path.iterdir()) == []
    code, said = _comal(tmp_path, "--ledger", target, "import", str(transcript), "--json")
    assert json.loads(said.splitlines()[-1])["error"]["code"] == "LEDGER_BAD_TARGET"


def test_the_command_line_takes_every_accepted_form(tmp_path: Path) -> None:
    # covers: LED-4
    transcript = tmp_path / "t.json"
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    (tmp_path / "cwd").mkdir()
    cwd = tmp_path / "cwd"
    db = tmp_path / "one ledger.db"
    url = "sqlite:///" + str(db).replace(" ", "%20")
    code, said = _comal(cwd, "--ledger", url, "import", str(transcript), "--json")
    assert code == 0, said
    sid = json.loads(said.splitlines()[0])["session"]
    for env in ({"COMAL_LEDGER": "file://" + str(db)}, {"COMAL_LEDGER": str(db)}):
        code, said = _comal(cwd, "sessions", "--json", env=env)
        assert code == 0 and [s["session"] for s in json.loads(said)] == [sid], said
    assert db.is_file() and list(cwd.iterdir()) == []


def test_the_command_line_takes_both_postgresql_schemes(tmp_path: Path) -> None:
    # covers: LED-4
    from _pg_support import fresh_schema, pg_dsn, pg_execute, url_with_schema

    transcript = tmp_path / "t.json"
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    with fresh_schema() as schema:
        pg_execute(pg_dsn(), None, f'CREATE SCHEMA "{schema}"')
        url = url_with_schema(pg_dsn(), schema)
        code, said = _comal(tmp_path, "--ledger", url, "import", str(transcript), "--json")
        assert code == 0, said
        sid = json.loads(said.splitlines()[0])["session"]
        short = url.replace("postgresql://", "postgres://", 1)
        code, said = _comal(tmp_path, "sessions", "--json", env={"COMAL_LEDGER": short})
        assert code == 0 and [s["session"] for s in json.loads(said)] == [sid], said
    assert list(tmp_path.iterdir()) == [transcript]


@pytest.mark.parametrize(("target", "todo"), REFUSED)
def test_each_refused_form_is_a_coded_error_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, todo: str
) -> None:
    # covers: LED-4
    from typer.testing import CliRunner

    from comal.cli import app

    transcript = tmp_path.parent / f"{tmp_path.name}-t.json"
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    done = runner.invoke(app, ["--ledger", target, "import", str(transcript), "--json"])
    error = json.loads(done.stdout.splitlines()[-1])["error"]
    assert done.exit_code == 2 and error["code"] == "LEDGER_BAD_TARGET", done.output
    assert todo in error["message"] and "s3cret" not in done.output
    shown = runner.invoke(app, ["sessions"], env={"COMAL_LEDGER": target, "COLUMNS": "300"})
    assert shown.exit_code == 2 and "LEDGER_BAD_TARGET" in shown.output
    assert "Traceback" not in shown.output and "s3cret" not in shown.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "url",
    ["sqlite:////{db}", "SQLITE3:////{db}", "file:///{db}", "file://localhost/{db}", "file:/{db}"],
)
def test_each_accepted_form_opens_the_same_file_on_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    # covers: LED-4
    from typer.testing import CliRunner

    from comal.cli import app

    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    transcript = tmp_path / "t.json"
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    db = tmp_path / "the ledger.db"
    target = url.format(db=str(db).lstrip("/").replace(" ", "%20"))
    runner = CliRunner()
    done = runner.invoke(app, ["--ledger", target, "import", str(transcript), "--json"])
    assert done.exit_code == 0, done.output
    sid = json.loads(done.stdout.splitlines()[0])["session"]
    listed = runner.invoke(app, ["--ledger", str(db), "sessions", "--json"])
    assert [s["session"] for s in json.loads(listed.stdout)] == [sid]
    assert list((tmp_path / "cwd").iterdir()) == []
