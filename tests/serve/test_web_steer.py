"""The web interface while the agent works, over HTTP against a running ``comal serve``
(DRV-2, DRV-3, SRF-1): Interrupt stops a running ``sleep 30`` now, whose first line ``/live``
streamed as it came, and the next turn tells the model; a prompt sent while the agent works
is queued (202, not 409) and goes in at the next safe point, a ``queue`` one after the run,
also when it reaches another ``comal serve`` on the same ledger than the one running the agent.

No wall-clock assertion: the commands wait for a file the test writes, or for thirty seconds
that the bounded waits below (a few seconds) would never see the end of.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from comal.ledger import open_ledger
from comal.ops import sandbox_status

from ._web_support import Process, Site, Web, say, site, tool

pytestmark = pytest.mark.skipif(
    not sandbox_status().available,
    reason=f"Bash runs in the OS sandbox, not usable here: {sandbox_status().reason}",
)

WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done; echo went"
# Polls of 50 ms: a few seconds, far from the thirty a command that ran out would take.
_SOON = 160


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The ledger: the site's SQLite file (``None``) or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield None
        return
    from _pg_support import fresh_schema, pg_dsn, url_with_schema

    dsn = pg_dsn()  # skips without COMAL_TEST_PG
    with fresh_schema() as schema:
        open_ledger(dsn, schema=schema).close()
        yield url_with_schema(dsn, schema)


@contextmanager
def _serving(s: Site, ledger: str | None = None) -> Iterator[Web]:
    server = Process(s, ledger=ledger)
    server.start()
    try:
        yield Web(server.url)
    finally:
        server.kill()


def _start(web: Web, prompt: str) -> str:
    r = web.post("/api/sessions", {"prompt": prompt})
    assert r.status_code == 201, r.text
    return str(r.json()["session"])


def _first(web: Web, sid: str, kind: str, test: Any = lambda data: True) -> dict[str, Any]:
    """The first ``/live`` event of ``kind`` that passes ``test``, read from the start; an
    error when the run stops first."""
    with web.http.stream("GET", f"/api/sessions/{sid}/live", params={"after": 0}) as live:
        event = None
        for line in live.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == kind:
                data: dict[str, Any] = json.loads(line[5:])
                if test(data):
                    return data
            elif line.startswith("data:") and event == "stopped":
                break
    raise AssertionError(f"no {kind} event before the run stopped")


def _idle_soon(web: Web, sid: str) -> None:
    web.wait(
        "the agent stopped",
        lambda: not web.get(f"/api/sessions/{sid}/gauge").json()["working"],
        polls=_SOON,
    )


def _lines(web: Web, sid: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = web.get(f"/api/sessions/{sid}/transcript").json()["lines"]
    return lines


def test_interrupt_stops_a_running_command_whose_output_streamed(tmp_path: Path) -> None:
    # covers: DRV-2, SRF-1
    script = [
        {"content": [tool("b1", "Bash", command="echo started; sleep 30; echo never")]},
        {"content": [say("Stopped, as you asked.")]},
    ]
    s = site(tmp_path, script, mode="trusted")
    with _serving(s) as web:
        sid = _start(web, "wait a while")
        # The command's first line reaches the page while it runs.
        shown = _first(web, sid, "output_delta", lambda d: "started" in d["text"])
        assert shown["stream"] == "stdout" and shown["call_id"] == "b1"
        r = web.post(f"/api/sessions/{sid}/interrupt")
        assert r.status_code == 200 and r.json()["observations"]["stopping"] is True
        _idle_soon(web, sid)
        (bash,) = [
            x
            for x in web.get(f"/api/sessions/{sid}/receipts").json()["receipts"]
            if x["operation"] == "Bash"
        ]
        assert bash["status"] == "interrupted" and bash["observations"]["seconds"] < 30
        who = bash["observations"]["interrupted_by"]
        assert who.startswith("the user local:")
        # The next prompt continues; the model is sent the interrupted result and comal's word.
        r = web.post(f"/api/sessions/{sid}/prompts", {"prompt": "what happened?"})
        assert r.status_code == 200, r.text
        web.idle(sid)
        lines = _lines(web, sid)
        texts = [line["text"] for line in lines]
        (output,) = [line for line in lines if line["kind"] == "output"]
        assert output["text"].startswith("started\n") and "never" not in output["text"]
        assert f"[interrupted by {who} after " in output["text"]
        told = texts.index(next(t for t in texts if "interrupted the run while Bash ran" in t))
        assert texts.index("what happened?") > told
        assert texts[-1] == "Stopped, as you asked."
        said_by = {line["text"]: line["who"] for line in lines if line["kind"] == "said"}
        assert said_by[texts[told]] == "comal"  # comal's word, not shown as the person's


def test_a_prompt_while_it_works_is_queued_at_either_server(
    tmp_path: Path, target: str | None
) -> None:
    # covers: DRV-3, SRF-1, SCL-1
    script = [
        {"content": [tool("w1", "Bash", command=WAIT_FOR_GO)]},
        {"content": [say("Noted: the docs too.")]},
        {"content": [say("And the changelog.")]},
    ]
    s = site(tmp_path, script, mode="trusted")
    with _serving(s, target) as a, _serving(s, target) as b:
        sid = _start(a, "start the work")
        _first(a, sid, "call")
        # Both messages reach the server that does not run the session: queued, not refused.
        steer = b.post(f"/api/sessions/{sid}/prompts", {"prompt": "also the docs"})
        assert steer.status_code == 202, steer.text
        later = b.post(
            f"/api/sessions/{sid}/prompts", {"prompt": "then the changelog", "queue": True}
        )
        assert later.status_code == 202, later.text
        assert (steer.json()["observations"]["mode"], later.json()["observations"]["mode"]) == (
            "steer",
            "queue",
        )
        # Every page shows them as queued until the agent takes them.
        queued = a.get(f"/api/sessions/{sid}/transcript").json()["queued"]
        assert [(q["prompt"], q["mode"]) for q in queued] == [
            ("also the docs", "steer"),
            ("then the changelog", "queue"),
        ]
        (s.work / "go").write_text("")
        a.idle(sid)
        b.idle(sid)
        assert a.get(f"/api/sessions/{sid}/transcript").json()["queued"] == []
        texts = [line["text"] for line in _lines(b, sid) if line["kind"] != "context"]
        went = next(i for i, t in enumerate(texts) if t.startswith("went"))
        # Steered: right after the command's result, before the model's next answer; queued:
        # once that run had finished, the next turn.
        assert texts[went + 1 :] == [
            "also the docs",
            "Noted: the docs too.",
            "then the changelog",
            "And the changelog.",
        ]
        delivered = _first(a, sid, "delivered")
        assert delivered["prompt"] == "also the docs"
    with open_ledger(target or s.ledger_path) as led:
        info = next(i for i in led.sessions() if i.id == sid)
        done = led.records(info.scope, "event", kinds=("prompt_delivered",))
        assert [d.body["mode"] for d in done] == ["steer", "queue"]  # each once, in order
        prompts = [r.body for r in led.records(info.scope, "receipt", kinds=("prompt",))]
        assert all(p["surface"] == "api" and p["actor"]["kind"] == "user" for p in prompts)
        assert [p["observations"].get("mode") for p in prompts][-2:] == ["steer", "queue"]


def test_a_resume_while_it_works_is_still_refused(tmp_path: Path) -> None:
    # covers: DRV-3
    script = [{"content": [tool("w1", "Bash", command=WAIT_FOR_GO)]}, {"content": [say("ok")]}]
    s = site(tmp_path, script, mode="trusted")
    with _serving(s) as web:
        sid = _start(web, "start the work")
        _first(web, sid, "call")
        r = web.post(f"/api/sessions/{sid}/prompts", {})
        assert r.status_code == 409 and r.json()["error"]["code"] == "AGENT_BUSY"
        (s.work / "go").write_text("")
        web.idle(sid)
