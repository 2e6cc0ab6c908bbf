"""`comal serve` and `comal keys` from the command line.

# covers: LED-2
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from comal.cli import app
from comal.ledger import open_ledger
from comal.serve._run import free_port


def test_keys_add_list_revoke(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "l.db")
    made = runner.invoke(app, ["--ledger", db, "keys", "add", "--tenant", "acme", "--json"])
    assert made.exit_code == 0, made.output
    key = json.loads(made.stdout)
    assert key["key"].startswith("comal_") and key["tenant"] == "acme"
    listed = runner.invoke(app, ["--ledger", db, "keys", "list", "--json"])
    (row,) = json.loads(listed.stdout)
    assert row["id"] == key["id"] and "key" not in row and row["active"]
    with open_ledger(Path(db)) as led, led.atomic() as c:
        assert led.check_proxy_key(key["key"]) is not None
        stored = c.execute("SELECT hash FROM proxy_keys").fetchone()[0]
        assert key["key"] not in stored and stored.startswith("sha256:")
    gone = runner.invoke(app, ["--ledger", db, "keys", "revoke", key["id"], "--json"])
    assert json.loads(gone.stdout)["active"] is False
    with open_ledger(Path(db)) as led:
        assert led.check_proxy_key(key["key"]) is None
    missing = runner.invoke(app, ["--ledger", db, "keys", "revoke", "nope"])
    assert missing.exit_code == 2 and "comal keys list" in missing.output


def test_serve_runs_and_refuses_an_unknown_engine(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["serve", "--ledger", str(tmp_path / "x.db"), "--engine", "nope"])
    assert bad.exit_code == 2 and "UNKNOWN_ENGINE" in bad.output
    port = free_port()
    env = {**os.environ, "COMAL_LEDGER": str(tmp_path / "l.db")}
    code = "from comal.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/sessions", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        assert r.json() == {"tenant": "local", "sessions": []}
    finally:
        process.terminate()
        _, said = process.communicate(timeout=20)
    assert "comal serve on" in said.decode()
