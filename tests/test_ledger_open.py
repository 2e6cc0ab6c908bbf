"""Opening a ledger: paths and URLs, who may create one, and a coded error for every stranger.

Walks each case of issue 9 §5 and issue 10 ("tracebacks"): a missing path, another program's
database, a file that is not a database, a directory, a pipe, a damaged file, read-only places,
malformed and password-carrying URLs. Each ends in a ``Ledger*`` error with a stable code and the
(redacted) target, and nothing on disk changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from _pg_support import fresh_schema, pg_dsn, pg_execute
from comal.errors import ComalError, LedgerError, SchemaVersionError
from comal.ledger import (
    LedgerBadTarget,
    LedgerCorrupt,
    LedgerForeign,
    LedgerIsADirectory,
    LedgerNotADatabase,
    LedgerNotFound,
    LedgerUnavailable,
    PostgresLedger,
    SQLiteLedger,
    default_ledger_path,
    describe_target,
    open_ledger,
    verify,
)
from comal.messages import Message

SRC = Path(__file__).resolve().parent.parent / "src"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()


def _rails(path: Path) -> None:
    # Another framework's migration table: same name, other columns.
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_migrations (version TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO schema_migrations VALUES ('20240101000000')")
    conn.commit()
    conn.close()


def _ledger(path: Path) -> None:
    with open_ledger(path) as led:
        scope = led.create_session("t", "a", session_id="s-1")
        led.append(scope, [Message.user("kept " * 200)])


def _malformed(path: Path) -> None:
    _ledger(path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for at in range(page, len(data), page):  # every page after the schema: b-tree headers gone
        data[at : at + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))


# (case, how to make it, the error, its code)
CASES = [
    ("missing file", None, LedgerNotFound, "LEDGER_NOT_FOUND"),
    ("empty file", lambda p: p.write_bytes(b""), LedgerNotFound, "LEDGER_NOT_FOUND"),
    ("another app's database", _foreign, LedgerForeign, "LEDGER_FOREIGN"),
    ("another schema_migrations", _rails, LedgerForeign, "LEDGER_FOREIGN"),
    ("text file", lambda p: p.write_text("name,age\nada,36\n" * 50), LedgerNotADatabase,
     "LEDGER_NOT_A_DATABASE"),
    ("directory", lambda p: p.mkdir(), LedgerIsADirectory, "LEDGER_IS_A_DIRECTORY"),
    ("named pipe", lambda p: os.mkfifo(p), LedgerNotADatabase, "LEDGER_NOT_A_DATABASE"),
    ("malformed database", _malformed, LedgerCorrupt, "LEDGER_CORRUPT"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "make", "error", "code"), CASES, ids=[c[0] for c in CASES])
def test_each_stranger_is_a_coded_error_and_left_untouched(
    tmp_path: Path, case: str, make: object, error: type[LedgerError], code: str
) -> None:
    # covers: LED-4
    path = tmp_path / "ledger.db"
    if callable(make):
        make(path)
    before = _listing(tmp_path)
    digest = _digest(path) if path.is_file() else None
    for create in (False, True) if case not in ("missing file", "empty file") else (False,):
        with pytest.raises(error) as err:
            open_ledger(path, create=create)
        assert err.value.code == code
        assert str(path) in str(err.value)
        assert err.value.__traceback__ is not None  # raised, not printed
    assert _listing(tmp_path) == before  # no file, no -wal, no -shm appeared
    if digest is not None:
        assert _digest(path) == digest


def test_create_false_makes_nothing_not_even_parents(tmp_path: Path) -> None:
    # covers: LED-4
    path = tmp_path / "a" / "b" / "ledger.db"
    with pytest.raises(LedgerNotFound, match="commands that write create a ledger"):
        open_ledger(path, create=False)
    with pytest.raises(LedgerNotFound):
        open_ledger(str(path), create=False)
    assert list(tmp_path.iterdir()) == []
    with open_ledger(path) as led:  # the default creates, as writing commands need
        led.create_session("t", "a")
    with open_ledger(path, create=False) as led:
        assert len(led.sessions()) == 1


def test_an_empty_file_becomes_a_ledger_only_when_creating(tmp_path: Path) -> None:
    # covers: LED-4
    path = tmp_path / "ledger.db"
    path.write_bytes(b"")
    with open_ledger(path, create=True) as led:
        assert led.sessions() == []
    with open_ledger(path, create=False) as led:
        assert verify(led).ok


def test_a_foreign_database_is_not_migrated(tmp_path: Path) -> None:
    # covers: LED-4
    path = tmp_path / "app.db"
    _foreign(path)
    with pytest.raises(LedgerForeign, match="not a comal ledger"):
        open_ledger(path)
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert tables == ["users"] and mode == "delete"


def test_a_newer_ledger_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    # covers: LED-4
    path = tmp_path / "ledger.db"
    _ledger(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_migrations VALUES ('9999_future', '')")
    conn.commit()
    conn.close()
    digest = _digest(path)
    with pytest.raises(SchemaVersionError, match="upgrade comal"):
        open_ledger(path, create=False)
    assert _digest(path) == digest


# -- read-only places: as an unprivileged user, since root writes anywhere -----------------------
_CHILD = """
import json, sys
from comal.errors import ComalError
from comal.ledger import Scope, open_ledger
from comal.messages import Message
path, action = sys.argv[1], sys.argv[2]
try:
    led = open_ledger(path, create=action == "create")
    scope = Scope("t", "a", "s-1")
    if action == "read":
        print(json.dumps({"ok": [e.message.text[:4] for e in led.entries(scope)]}))
    else:
        led.append(scope, [Message.user("more")])
        print(json.dumps({"ok": "wrote"}))
except ComalError as exc:
    print(json.dumps({"code": exc.code, "message": str(exc)}))
"""


def _unprivileged(path: Path, action: str) -> dict[str, object]:
    """Run ``action`` on ``path`` in a child that obeys file permissions: root without its
    capabilities (root owns the files, so their owner bits apply), or this user as is."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv (util-linux) to drop capabilities")
        prefix = [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--"]
    env = dict(os.environ, PYTHONPATH=str(SRC))
    run = subprocess.run(
        [*prefix, sys.executable, "-c", _CHILD, str(path), action],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    result: dict[str, object] = json.loads(run.stdout)
    return result


def test_read_only_places_say_so(tmp_path: Path) -> None:
    # covers: LED-4
    # A new ledger in a read-only directory.
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    got = _unprivileged(ro / "ledger.db", "create")
    assert got["code"] == "LEDGER_READ_ONLY" and "writable" in str(got["message"])
    assert list(ro.iterdir()) == []
    # An existing ledger the user may not write, in a directory it may: reads work, writes say so.
    rw = tmp_path / "rw"
    rw.mkdir()
    rw.chmod(0o777)
    _ledger(rw / "ledger.db")
    (rw / "ledger.db").chmod(0o444)
    assert _unprivileged(rw / "ledger.db", "read") == {"ok": ["kept"]}
    got = _unprivileged(rw / "ledger.db", "write")
    assert got["code"] == "LEDGER_READ_ONLY", got
    # A WAL ledger in a read-only directory: SQLite cannot even make its -shm to read it.
    _ledger(ro.parent / "tmp.db")
    ro.chmod(0o755)
    (ro.parent / "tmp.db").rename(ro / "ledger.db")
    ro.chmod(0o555)
    got = _unprivileged(ro / "ledger.db", "read")
    assert got["code"] == "LEDGER_READ_ONLY" and "directory is read-only" in str(got["message"])


# -- targets: paths and URLs ---------------------------------------------------------------------
def test_describe_target_never_shows_a_password() -> None:
    # covers: LED-4
    url = "postgresql://me:s3cr%40t@db.example:5433/app?password=other&sslmode=require"
    shown = describe_target(url)
    assert shown == "postgresql://me@db.example:5433/app?sslmode=require"
    assert describe_target("postgres://:pw@h/db") == "postgres://h/db"
    assert describe_target(Path("/var/ledger.db")) == "/var/ledger.db"


@pytest.mark.parametrize(
    "target",
    [
        Path("postgresql://u:pw@h/db"),  # a URL through a filesystem path loses its //
        "postgresql:/u:pw@h/db",
        "postgres://u:pw@h:port/db",
        "postgresql://u:pw@[::1/db",
    ],
)
def test_malformed_urls_are_refused_and_create_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object
) -> None:
    # covers: LED-4
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerBadTarget) as err:
        open_ledger(target)  # type: ignore[call-overload]
    assert err.value.code == "LEDGER_BAD_TARGET" and "pw" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_server_hides_the_password_everywhere() -> None:
    # covers: LED-4
    for url in (
        "postgresql://comal:s3cret-pw@127.0.0.1:1/nowhere?connect_timeout=2",
        "postgres://comal@127.0.0.1:1/nowhere?password=s3cret-pw&connect_timeout=2",
    ):
        with pytest.raises(LedgerUnavailable) as err:
            open_ledger(url)
        assert err.value.code == "LEDGER_UNAVAILABLE"
        assert "s3cret-pw" not in str(err.value) and "127.0.0.1:1/nowhere" in str(err.value)
        assert "server is running" in str(err.value)


def test_default_target_reads_comal_ledger_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: LED-4
    monkeypatch.setenv("COMAL_LEDGER", "postgresql://u:pw@127.0.0.1:1/x?connect_timeout=1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerUnavailable):
        open_ledger()  # the URL from the environment, not a file named postgresql:
    with pytest.raises(LedgerBadTarget, match="pass the URL as text"):
        open_ledger(default_ledger_path())  # what a Path-typed --ledger hands over
    assert list(tmp_path.iterdir()) == []


def test_postgres_scheme_and_create_false(tmp_path: Path) -> None:
    # covers: LED-4
    dsn = pg_dsn()
    with fresh_schema() as schema:
        with pytest.raises(LedgerNotFound, match="no schema"):
            open_ledger(dsn, schema=schema, create=False)
        with open_ledger(dsn.replace("postgresql://", "postgres://", 1), schema=schema) as led:
            assert isinstance(led, PostgresLedger)
            assert "comal@" in led.target and ":comal@" not in led.target
            led.create_session("t", "a")
        with open_ledger(dsn, schema=schema, create=False) as led:
            assert len(led.sessions()) == 1
    with fresh_schema() as schema:
        pg_execute(dsn, None, f'CREATE SCHEMA "{schema}"')
        with pytest.raises(LedgerNotFound, match="no ledger"):
            open_ledger(dsn, schema=schema, create=False)
        pg_execute(dsn, schema, "CREATE TABLE sessions (id TEXT PRIMARY KEY, who TEXT)")
        for create in (False, True):
            with pytest.raises(LedgerForeign):
                open_ledger(dsn, schema=schema, create=create)
    assert isinstance(open_ledger(tmp_path / "l.db"), SQLiteLedger)


def test_every_open_failure_is_a_comal_error(tmp_path: Path) -> None:
    # covers: LED-4
    # A catch-all: whatever the stranger, the caller sees a ComalError, never sqlite3's.
    weird = [tmp_path / "nope" / "x.db"]
    (tmp_path / "file").write_text("x")
    weird.append(tmp_path / "file" / "x.db")  # a parent that is a file
    for path in weird:
        with pytest.raises(ComalError):
            open_ledger(path, create=False)
