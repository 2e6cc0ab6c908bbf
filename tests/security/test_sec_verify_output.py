"""``comal verify`` on a ledger with a flipped byte: its report is valid UTF-8 (and valid JSON
with ``--json``), names the damaged row by the byte it holds, and never ends in a traceback —
whatever the terminal's encoding.

# covers: LED-6
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from comal.ledger import open_ledger
from comal.messages import Message


def _flipped(db: Path) -> str:
    led = open_ledger(db, create=True)
    scope = led.create_session("t", "a", messages=[Message.user("hello")])
    led.close()
    conn = sqlite3.connect(db)
    raw = bytearray(scope.session.encode())
    raw[3] = 0xFF  # the attack: one byte of the session id is no longer UTF-8
    conn.execute("PRAGMA foreign_keys = OFF")
    for table, column in (("entries", "session_id"), ("sessions", "id")):
        conn.execute(
            f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE {column} = ?",
            (bytes(raw), scope.session),
        )
    conn.commit()
    assert (
        conn.execute("SELECT count(*) FROM sessions WHERE id = ?", (scope.session,)).fetchone()[0]
        == 0
    )
    conn.close()
    return scope.session


@pytest.mark.parametrize("as_json", [False, True])
def test_verify_reports_a_damaged_byte_as_valid_utf8(tmp_path: Path, as_json: bool) -> None:
    db = tmp_path / "ledger.db"
    session = _flipped(db)
    env = os.environ | {"PYTHONIOENCODING": "utf-8", "LANG": "C.UTF-8", "COLUMNS": "200"}
    args = [sys.executable, "-m", "comal", "--ledger", str(db), "verify"]
    done = subprocess.run([*args, *(["--json"] if as_json else [])], capture_output=True, env=env)
    assert done.returncode == 1, done.stderr  # faults found, said, not a crash
    out = done.stdout.decode("utf-8")  # raises if the report is not UTF-8
    assert "Traceback" not in done.stderr.decode("utf-8")
    shown = session[:3] + "\\xff" + session[4:]
    if as_json:
        report = json.loads(out)
        assert not report["ok"] and any(f["session"] == shown for f in report["faults"])
    else:
        assert shown[:8] in out
