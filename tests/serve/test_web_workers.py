"""The web interface when more than one process serves it (SRF-1, SCL-1): ``comal serve
--workers 2`` behind one socket, and two ``comal serve`` processes on one ledger.

The attack run of issue 30 found a page's token good on one worker only, and a harmless
``/state`` that landed on the worker not running the session opening a second runtime there,
which refused the live worker's pending approval as "the worker that asked is gone": the
person's approval then got 409 and the Edit never applied. Here the page's token comes from one
process and its POSTs land on the other; the approval applies the Edit whichever process takes
it; an interrupt and ``/mode`` reach the process that runs the session; ``/live`` shows the run
from a process that does not run it.

Which worker takes a connection is the kernel's choice: a request meant for one worker is sent
on fresh connections until one lands there (``x-comal-worker`` says which took it), and only
requests that change nothing when they land elsewhere are sent that way.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.ledger import open_ledger
from comal.serve._workers import WORKER_HEADER

from ._web_support import Process, Site, say, site, tool

EDIT = tool("e1", "Edit", path="notes.txt", old_string="hello\n", new_string="hello web\n")
EDIT_THEN_ANSWER: list[dict[str, Any]] = [
    {"content": [say("Looking at the notes."), EDIT]},
    {"content": [say("Done: notes.txt greets the web.")]},
]
EDIT_THEN_BASH: list[dict[str, Any]] = [
    {"content": [say("Looking at the notes."), EDIT]},
    {"content": [tool("b1", "Bash", command="echo more > more.txt")]},
    {"content": [say("Done.")]},
]
# Connections sent to reach one worker; the kernel hands each to either, so this many misses
# in a row does not happen while both serve.
_TRIES = 200
_POLLS = 1_200


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | None]:
    """The ledger: the site's SQLite file (``None``) or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield None
        return
    from _pg_support import fresh_schema, pg_dsn, url_with_schema

    dsn = pg_dsn()  # skips without COMAL_TEST_PG
    with fresh_schema() as schema:
        open_ledger(dsn, schema=schema).close()  # the URL names the schema; create it first
        yield url_with_schema(dsn, schema)


@contextmanager
def _serving(s: Site, ledger: str | None, *options: str) -> Iterator[str]:
    server = Process(s, None, *options, ledger=ledger)
    server.start()
    try:
        yield server.url
    finally:
        server.kill()


def _once(url: str, path: str, token: str | None = None, body: Any = None) -> httpx.Response:
    """One request on a connection of its own: a GET, or a POST with the page's token."""
    with httpx.Client(base_url=url, timeout=60) as client:
        if token is None:
            return client.get(path)
        return client.post(path, json=body or {}, headers={"x-comal-csrf": token})


def _landing(send: Callable[[], httpx.Response], on: Callable[[str], bool]) -> httpx.Response:
    """``send()`` again until a worker ``on`` accepts takes it; every answer must be a 2xx."""
    for _ in range(_TRIES):
        r = send()
        assert r.is_success, (r.headers.get(WORKER_HEADER), r.text)
        if on(r.headers[WORKER_HEADER]):
            return r
    raise AssertionError(f"no worker of the wanted kind took any of {_TRIES} connections")


def _until(what: str, check: Callable[[], Any]) -> Any:
    for _ in range(_POLLS):
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def _pending(url: str, sid: str, known: Collection[str] = ()) -> dict[str, Any]:
    def asked() -> dict[str, Any] | None:
        asks = _once(url, f"/api/sessions/{sid}/asks").json()["approvals"]
        return next((a for a in asks if a["id"] not in known), None)

    found: dict[str, Any] = _until("an approval", asked)
    return found


def _idle(url: str, sid: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        g: dict[str, Any] = _once(url, f"/api/sessions/{sid}/gauge").json()
        return None if g.get("working") else g

    found: dict[str, Any] = _until("the agent stopped", done)
    return found


class _Follower:
    """``GET /live?after=0`` on a worker ``on`` accepts, read on a thread until ``stopped``
    (``count`` of them)."""

    def __init__(self, url: str, sid: str, on: Callable[[str], bool], count: int = 1) -> None:
        self.kinds: list[str] = []
        self.worker: str | None = None
        self.opened = threading.Event()
        self._args = (url, sid, on, count)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        assert self.opened.wait(60), "the event stream did not open"

    def _follow(self) -> None:
        url, sid, on, count = self._args
        with contextlib.suppress(httpx.HTTPError):  # the server stopped: the test has its kinds
            for _ in range(_TRIES):
                with (
                    httpx.Client(base_url=url, timeout=120) as client,
                    client.stream("GET", f"/api/sessions/{sid}/live", params={"after": 0}) as r,
                ):
                    worker = r.headers.get(WORKER_HEADER, "")
                    if not on(worker):
                        continue
                    self.worker = worker
                    self.opened.set()
                    for line in r.iter_lines():
                        if line.startswith("event:"):
                            self.kinds.append(line[6:].strip())
                            if self.kinds.count("stopped") >= count:
                                return
                    return

    def seen(self, timeout: float = 60) -> list[str]:
        self._thread.join(timeout)
        return self.kinds


def test_a_page_steers_a_session_whichever_of_two_workers_answers(
    tmp_path: Path, target: str | None
) -> None:
    # covers: SRF-1, SCL-1
    s = site(tmp_path, EDIT_THEN_ANSWER)
    with _serving(s, target, "--workers", "2") as url:
        # The page's token comes from worker 0; its POSTs land on either worker.
        token = _landing(lambda: _once(url, "/api/web"), lambda w: w == "0").json()["csrf"]
        start = {"prompt": "Make notes.txt greet the web."}
        started = _once(url, "/api/sessions", token, start)
        assert started.status_code == 201, started.text
        sid, owner = started.json()["session"], started.headers[WORKER_HEADER]
        asked = _pending(url, sid)
        other: Callable[[str], bool] = lambda w: w != owner  # noqa: E731
        follower = _Follower(url, sid, other)
        # A harmless command answered by the worker that does not run the session...
        state = f"/api/sessions/{sid}/commands/state"
        r = _landing(lambda: _once(url, state, token), other)
        assert r.json()["operation"] == "state"
        # ...leaves the approval pending, and the person's answer applies the Edit.
        asks = _once(url, f"/api/sessions/{sid}/asks").json()["approvals"]
        assert [a["id"] for a in asks] == [asked["id"]]
        r = _once(url, f"/api/sessions/{sid}/approvals/{asked['id']}", token, {"granted": True})
        assert r.status_code == 200, r.text
        _idle(url, sid)
        assert (s.work / "notes.txt").read_text() == "hello web\n"
        # The worker that did not run it streamed the run from the ledger.
        kinds = follower.seen()
        assert follower.worker != owner
        assert {"working", "approval", "judged", "executed", "stopped"} <= set(kinds), kinds
    with open_ledger(target or s.ledger_path) as led:
        info = next(i for i in led.sessions() if i.id == sid)
        assert info.status == "finished"
        answers = led.records(info.scope, "event", kinds=("approval_answer",))
        assert [a.body["granted"] for a in answers] == [True]


def test_two_servers_on_one_ledger_steer_one_session(tmp_path: Path, target: str | None) -> None:
    # covers: SRF-1, SCL-1, OPS-2
    s = site(tmp_path, EDIT_THEN_BASH)
    with _serving(s, target) as a, _serving(s, target) as b:
        mine = {u: _once(u, "/api/web").json()["csrf"] for u in (a, b)}
        start = {"prompt": "Make notes.txt greet the web."}
        started = _once(a, "/api/sessions", mine[a], start)
        assert started.status_code == 201, started.text
        sid = started.json()["session"]
        edit = _pending(a, sid)
        follower = _Follower(b, sid, lambda w: True)
        # A harmless command at the server that does not run the session disturbs nothing.
        r = _once(b, f"/api/sessions/{sid}/commands/state", mine[b])
        assert r.status_code == 200, r.text
        asks = _once(b, f"/api/sessions/{sid}/asks").json()["approvals"]
        assert [x["id"] for x in asks] == [edit["id"]]
        assert _once(b, f"/api/sessions/{sid}/gauge").json()["working"] is True
        # Approved at the other server: the Edit applies.
        r = _once(b, f"/api/sessions/{sid}/approvals/{edit['id']}", mine[b], {"granted": True})
        assert r.status_code == 200, r.text
        _until("the Edit", lambda: (s.work / "notes.txt").read_text() == "hello web\n")
        # The Bash is asked next; an interrupt at the other server reaches the running agent.
        bash = _pending(b, sid, {edit["id"]})
        r = _once(b, f"/api/sessions/{sid}/interrupt", mine[b])
        assert r.status_code == 200, r.text
        assert r.json()["observations"]["stopping"] is True
        _idle(b, sid)
        assert not (s.work / "more.txt").exists()
        # /mode at one server is the session's mode at the other.
        r = _once(b, f"/api/sessions/{sid}/commands/mode", mine[b], {"mode": "read-only"})
        assert r.status_code == 200, r.text
        assert _once(a, f"/api/sessions/{sid}/gauge").json()["mode"] == "read-only"
        # One token for the caller, whichever server gave it.
        assert mine[a] == mine[b]
        kinds = follower.seen()
        assert {"approval", "executed", "interrupting", "stopped"} <= set(kinds), kinds
    with open_ledger(target or s.ledger_path) as led:
        info = next(i for i in led.sessions() if i.id == sid)
        answers = {
            r.body["request"]: r.body
            for r in led.records(info.scope, "event", kinds=("approval_answer",))
        }
        assert answers[edit["id"]]["granted"] is True
        assert answers[bash["id"]]["granted"] is False
        assert "interrupted" in answers[bash["id"]]["reason"]
