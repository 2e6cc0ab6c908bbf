"""Pieces the web interface's tests share: an operator configuration allowing one workspace and
two scripted models, the scenario's script, a server in a thread or in its own process, and a
client that sends the server's CSRF token."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.agent import Config, load_config
from comal.ledger import SQLiteLedger, open_ledger
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread, free_port

NOTES = "hello\n"


def tool(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def say(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


# The scenario of issue 22: an Edit to approve from its diff, a board item and a Bash to deny,
# the item done, an answer; then, after /compact and /model, a Bash the server is killed on,
# and the answer after the restart.
SCENARIO: list[dict[str, Any]] = [
    {
        "content": [
            say("Looking at the notes."),
            tool("e1", "Edit", path="notes.txt", old_string="hello\n", new_string="hello web\n"),
        ]
    },
    {
        "content": [
            tool("k1", "BoardAdd", text="notes greet the web"),
            tool("b1", "Bash", command="rm -rf build"),
        ]
    },
    {"content": [tool("k2", "BoardUpdate", item=1, status="done")]},
    {"content": [say("Done: notes.txt greets the web.")]},
    {"content": [tool("b2", "Bash", command="echo resumed > after.txt")]},
    {"content": [say("All done after the restart.")]},
]

# Two reads, the older of a long log, before SCENARIO: /compact then has more before the
# protected tail (the newest step, the five newest outputs) than a checkpoint of it would take,
# and stores one (it stores none that would not make the context smaller).
READS: list[dict[str, Any]] = [
    {"content": [tool("r0", "Read", path="log.txt")]},
    {"content": [tool("r1", "Read", path="notes.txt")]},
]
LOG = "".join(f"line {i}: all went well\n" for i in range(400))


# The replies the first model answers before the scenario's /model.
_SWITCHED_AT = 4


@dataclass
class Site:
    root: Path
    work: Path
    config_file: Path
    ledger_path: Path
    models: tuple[str, str]

    def operator(self) -> Config:
        return load_config(self.config_file, env={})


def site(tmp_path: Path, script: list[dict[str, Any]] = SCENARIO, **extra: Any) -> Site:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTES)
    (work / "log.txt").write_text(LOG)
    specs = []
    # The second model is switched to with /model after the scenario's first answer: a new
    # script starts at its own first reply (the requests it answered), so it holds the rest.
    lead = len(script) - len(SCENARIO)  # READS before the scenario switch that much later
    later = script[lead + _SWITCHED_AT :] if lead >= 0 and script[lead:] == SCENARIO else script
    for name, replies in (("first", script), ("second", later)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in replies))
        specs.append(f"script:{path}")
    serve = {"workspaces": [str(work)], "models": [specs[1]]} | extra.pop("serve", {})
    config = {"model": specs[0], "mode": "ask", "serve": serve} | extra
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config))
    return Site(tmp_path, work, config_file, tmp_path / "ledger.db", (specs[0], specs[1]))


_OPEN: list[httpx.Client] = []


class Web:
    """An HTTP client of the web routes: the token is fetched once and sent on every POST."""

    def __init__(self, url: str, key: str | None = None) -> None:
        headers = {"x-comal-key": key} if key else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=30)
        self._csrf: str | None = None
        _OPEN.append(self.http)  # closed when the server stops

    @property
    def csrf(self) -> str:
        if self._csrf is None:
            self._csrf = str(self.http.get("/api/web").json()["csrf"])
        return self._csrf

    def post(self, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        headers = {"x-comal-csrf": self.csrf} | kw.pop("headers", {})
        return self.http.post(path, json=body if body is not None else {}, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.http.get(path, **kw)

    def wait(self, what: str, check: Any, *, polls: int = 600) -> Any:
        """Poll ``check()`` until it returns something truthy (bounded by count, not time)."""
        for _ in range(polls):
            found = check()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"never happened: {what}")

    def approval(self, session: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            asks = self.get("/api/approvals").json()["approvals"]
            return next((a for a in asks if a["session"] == session), None)

        result: dict[str, Any] = self.wait("an approval", found)
        return result

    def idle(self, session: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            g = self.get(f"/api/sessions/{session}/gauge").json()
            return None if g.get("working") else g

        result: dict[str, Any] = self.wait("the agent stopped", done)
        return result


@contextmanager
def in_thread(s: Site, **settings: Any) -> Iterator[tuple[str, SQLiteLedger]]:
    led = open_ledger(s.ledger_path)
    app = create_app(ServeConfig(operator=s.operator(), **settings), ledger=led)
    try:
        with ServerThread(app) as server:
            try:
                yield server.url, led
            finally:
                while _OPEN:
                    _OPEN.pop().close()
    finally:
        led.close()


class Process:
    """``comal serve`` in its own process, so a test can kill it (SIGKILL) mid-turn; on the
    site's SQLite ledger or on ``ledger`` (a PostgreSQL URL), with more ``options``
    (``--workers 2``)."""

    def __init__(
        self, s: Site, port: int | None = None, *options: str, ledger: str | None = None
    ) -> None:
        self.site = s
        self.port = port or free_port()
        self.options = options
        self.ledger = ledger or str(s.ledger_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        s = self.site
        command = [sys.executable, "-m", "comal", "serve", "--port", str(self.port)]
        command += ["--config", str(s.config_file), "--ledger", self.ledger, *self.options]
        self._log = open(s.root / "serve.log", "ab")  # closed by kill()
        # A group of its own: --workers forks, and kill() ends the workers with their parent.
        self.proc = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=self._log,
            env=dict(os.environ),
            start_new_session=True,
        )
        for _ in range(400):
            if self.proc.poll() is not None:
                raise AssertionError((s.root / "serve.log").read_text())
            try:
                if httpx.get(self.url + "/api/web", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("comal serve did not answer")

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium under Playwright (nothing downloaded); skips where it is missing."""
    if not CHROMIUM.exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is missing: `.ci/run` installs it (apt-get install)")
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed: the chrome extra (make installs it)",
    )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
