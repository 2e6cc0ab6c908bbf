"""The web interface's routes: sessions that run in the server, steered by human operations on
the ``api`` surface (SRF-1), each judged and receipted with the authenticated caller (OPS-2).

Tenant isolation on every new route, bodies that try to name an actor refused, cross-origin
and foreign-``Host`` requests refused, the CSRF token required, a crashing session leaving the
server (and the next session) up, an interrupt refusing the pending approval, and the
operator's workspaces and models as the only ones a page may use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from comal.agent import Runtime, lock_session
from comal.ledger import open_ledger
from comal.messages import ToolCall
from comal.ops import Actor
from comal.serve import _web_sessions
from comal.serve._web_sessions import WebRuntime

from ._web_support import READS, SCENARIO, Web, in_thread, say, site, tool


def _start(web: Web, **body: Any) -> str:
    r = web.post("/api/sessions", {"prompt": "greet the web"} | body)
    assert r.status_code == 201, r.text
    return str(r.json()["session"])


def test_routes_are_scoped_to_the_callers_tenant(tmp_path: Path) -> None:
    # covers: LED-2, SRF-1
    s = site(tmp_path)
    with open_ledger(s.ledger_path) as led:
        _, key_a = led.add_proxy_key("acme")
        _, key_b = led.add_proxy_key("other")
    with in_thread(s) as (url, _):
        a, b = Web(url, key_a), Web(url, key_b)
        # Once keys exist, a caller without one gets nothing, not even the token.
        nobody = Web(url)
        assert nobody.get("/api/web").status_code == 401
        r = nobody.http.post("/api/sessions", json={"prompt": "hi"}, headers={"x-comal-csrf": "x"})
        assert r.status_code == 401
        sid = _start(a)
        asked = a.approval(sid)
        for path in ("transcript", "work", "gauge", "live"):
            r = b.get(f"/api/sessions/{sid}/{path}")
            assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", path
        for path, body in (
            ("prompts", {"prompt": "hi"}),
            ("interrupt", {}),
            ("commands/state", {}),
            (f"approvals/{asked['id']}", {"granted": True}),
        ):
            r = b.post(f"/api/sessions/{sid}/{path}", body)
            assert r.status_code == 404, (path, r.text)
        assert sid not in {x["id"] for x in b.get("/api/sessions").json()["sessions"]}
        # A token is the caller's: another key's is refused.
        assert a.csrf != b.csrf
        r = b.post("/api/sessions", {"prompt": "hi"}, headers={"x-comal-csrf": a.csrf})
        assert r.status_code == 403 and r.json()["error"]["code"] == "CSRF_TOKEN"
        # The owner answers; the receipt's actor is the key that proved the tenant.
        r = a.post(f"/api/sessions/{sid}/approvals/{asked['id']}", {"granted": False})
        assert r.status_code == 200, r.text
        assert r.json()["actor"]["id"].startswith("acme:")
        a.post(f"/api/sessions/{sid}/interrupt")
        a.idle(sid)


def test_a_body_cannot_name_the_actor(tmp_path: Path) -> None:
    # covers: OPS-2
    s = site(tmp_path)
    with in_thread(s) as (url, led):
        web = Web(url)
        forged = {"prompt": "hi", "actor": {"kind": "operator", "id": "root"}}
        r = web.post("/api/sessions", forged)
        assert r.status_code == 422
        sid = _start(web)
        asked = web.approval(sid)
        r = web.post(
            f"/api/sessions/{sid}/approvals/{asked['id']}",
            {"granted": True, "by": {"kind": "operator", "id": "root"}},
        )
        assert r.status_code == 422
        r = web.post(f"/api/sessions/{sid}/commands/name", {"name": "x", "actor": "root"})
        assert r.status_code == 400 and "actor" in r.text
        r = web.post(f"/api/sessions/{sid}/approvals/{asked['id']}", {"granted": True})
        assert r.status_code == 200
        actor = r.json()["actor"]
        assert actor["kind"] == "user" and actor["id"].startswith("local:")
        web.post(f"/api/sessions/{sid}/interrupt")
        web.idle(sid)
        info = next(i for i in led.sessions() if i.id == sid)
        receipts = [r.body for r in led.records(info.scope, "receipt")]
        mine = [r for r in receipts if r["operation"] in ("prompt", "approve", "name")]
        assert mine and all(r["surface"] == "api" and r["actor"] == actor for r in mine)


def test_cross_origin_foreign_host_and_missing_token_are_refused(tmp_path: Path) -> None:
    # covers: SRF-1
    s = site(tmp_path)
    with in_thread(s) as (url, _):
        web = Web(url)
        body = {"prompt": "hi"}
        r = web.post("/api/sessions", body, headers={"origin": "http://evil.example"})
        assert r.status_code == 403
        r = web.post("/api/sessions", body, headers={"host": "evil.example"})
        assert r.status_code == 400
        r = web.post("/api/sessions", body, headers={"sec-fetch-site": "cross-site"})
        assert r.status_code == 403
        r = web.http.post("/api/sessions", json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "CSRF_TOKEN"
        r = web.post("/api/sessions", body, headers={"x-comal-csrf": "guess"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "CSRF_TOKEN"
        # A page of this server's own origin gets the token and may act.
        own = {"origin": url, "sec-fetch-site": "same-origin"}
        assert web.get("/api/web", headers=own).status_code == 200
        r = web.post("/api/sessions", body, headers=own)
        assert r.status_code == 201
        web.post(f"/api/sessions/{r.json()['session']}/interrupt")
        web.idle(r.json()["session"])


def test_only_the_operators_workspaces_and_models(tmp_path: Path) -> None:
    # covers: CFG-2, SRF-1
    s = site(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with in_thread(s) as (url, led):
        web = Web(url)
        r = web.post("/api/sessions", {"prompt": "hi", "workspace": str(elsewhere)})
        assert r.status_code == 403 and r.json()["error"]["code"] == "WORKSPACE_NOT_ALLOWED"
        r = web.post("/api/sessions", {"prompt": "hi", "workspace": str(s.work / "..")})
        assert r.status_code == 403
        r = web.post("/api/sessions", {"prompt": "hi", "model": "script:/etc/passwd"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "MODEL_NOT_ALLOWED"
        assert led.sessions() == []  # nothing was created
        sid = _start(web)
        r = web.post(f"/api/sessions/{sid}/commands/model", {"model": "script:/etc/passwd"})
        assert r.status_code == 403
        r = web.post(f"/api/sessions/{sid}/commands/model", {"model": s.models[1]})
        assert r.status_code == 200, r.text
        assert web.get(f"/api/sessions/{sid}/gauge").json()["model"] == s.models[1]
        web.post(f"/api/sessions/{sid}/interrupt")
        web.idle(sid)


def test_the_operators_mode_is_the_ceiling(tmp_path: Path) -> None:
    # covers: CFG-2, SRF-1, OPS-6
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])  # mode: ask
    with in_thread(s) as (url, led):
        web = Web(url)
        # A page asks for a wider mode than the operator's: refused, nothing created.
        r = web.post("/api/sessions", {"prompt": "hi", "mode": "trusted"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "MODE_NOT_ALLOWED"
        assert led.sessions() == []
        # Unset, serve.modes is the configured mode and the stricter ones.
        assert web.get("/api/web").json()["modes"] == ["read-only", "ask"]
        sid = _start(web, mode="read-only")
        web.idle(sid)
        r = web.post(f"/api/sessions/{sid}/commands/mode", {"mode": "trusted"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "MODE_NOT_ALLOWED"
        assert web.get(f"/api/sessions/{sid}/gauge").json()["mode"] == "read-only"
        r = web.post(f"/api/sessions/{sid}/commands/mode", {"mode": "ask"})
        assert r.status_code == 200, r.text
        assert web.get(f"/api/sessions/{sid}/gauge").json()["mode"] == "ask"
    # An operator who names the modes: only those, and a session starts in one of them.
    other = tmp_path / "other"
    other.mkdir()
    s = site(other, [{"content": [say("Nothing to change.")]}], serve={"modes": ["read-only"]})
    with in_thread(s) as (url, led):
        web = Web(url)
        info = web.get("/api/web").json()
        assert info["modes"] == ["read-only"] and info["mode"] == "read-only"
        r = web.post("/api/sessions", {"prompt": "hi", "mode": "ask"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "MODE_NOT_ALLOWED"
        sid = _start(web)
        web.idle(sid)
        assert web.get(f"/api/sessions/{sid}/gauge").json()["mode"] == "read-only"
        r = web.post(f"/api/sessions/{sid}/commands/mode", {"mode": "ask"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "MODE_NOT_ALLOWED"


def test_a_session_another_process_runs_is_not_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: SRF-1, RES-2, DRV-3
    monkeypatch.setattr(_web_sessions, "RELAY_S", 0.5, raising=False)
    monkeypatch.setattr(_web_sessions, "CLAIM_S", 0.2, raising=False)
    script = [{"content": [say("Nothing to change.")]}, {"content": [say("Still nothing.")]}]
    s = site(tmp_path, script)
    with in_thread(s) as (url, led):
        web = Web(url)
        sid = _start(web)
        web.idle(sid)
        info = next(i for i in led.sessions() if i.id == sid)
        entries = info.entries
        # Another process holds the session (a `comal -p --resume`): it runs the session and
        # takes no request from the web. A prompt is queued for it (it delivers at its next
        # safe point); a resume has nothing to do.
        with lock_session(led, info.scope):
            assert web.get(f"/api/sessions/{sid}/gauge").json()["working"] is True
            r = web.post(f"/api/sessions/{sid}/prompts", {"prompt": "again"})
            assert r.status_code == 202 and r.json()["observations"]["mode"] == "steer"
            r = web.post(f"/api/sessions/{sid}/prompts", {})
            assert r.status_code == 409 and r.json()["error"]["code"] == "AGENT_BUSY"
            r = web.post(f"/api/sessions/{sid}/commands/mode", {"mode": "read-only"})
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "OWNER_NOT_ANSWERING"
            assert web.post(f"/api/sessions/{sid}/commands/state").status_code == 200
            assert led.session(info.scope).entries == entries  # type: ignore[union-attr]
        # Let go, the session is the web's again; the request given up on never runs, and the
        # web, taking the lock back, runs the message still queued.
        r = web.post(f"/api/sessions/{sid}/commands/mode", {"mode": "read-only"})
        assert r.status_code == 200, r.text
        web.idle(sid)
        modes = led.records(info.scope, "receipt", kinds=("mode",))
        assert [m.body["observations"]["after"] for m in modes] == ["read-only"]
        said = [line["text"] for line in web.get(f"/api/sessions/{sid}/transcript").json()["lines"]]
        assert said.count("again") == 1 and said[-1] == "Still nothing."
        assert len(led.records(info.scope, "event", kinds=("prompt_delivered",))) == 1


def test_a_crashing_session_leaves_the_server_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # covers: SRF-1
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])
    real = Runtime.run
    crashes = []

    def run(self: WebRuntime, *args: Any, **kw: Any) -> Any:
        if not crashes:
            crashes.append(self.scope)
            raise RuntimeError("the worker fell over")
        return real(self, *args, **kw)

    monkeypatch.setattr(WebRuntime, "run", run)
    with in_thread(s) as (url, led):
        web = Web(url)
        first = _start(web)
        web.idle(first)
        info = next(i for i in led.sessions() if i.id == first)
        crashed = led.records(info.scope, "event", kinds=("web_worker_crashed",))
        assert crashed and crashed[0].body["type"] == "RuntimeError"
        # The server answers, another session runs to its end, and the crashed one resumes.
        assert web.get("/api/sessions").status_code == 200
        second = _start(web)
        web.idle(second)
        assert next(i for i in led.sessions() if i.id == second).status == "finished"
        r = web.post(f"/api/sessions/{first}/prompts", {"prompt": "greet the web"})
        assert r.status_code == 200, r.text
        web.idle(first)
        assert next(i for i in led.sessions() if i.id == first).status == "finished"


def test_an_interrupt_refuses_the_pending_approval_and_stops(tmp_path: Path) -> None:
    # covers: SRF-1, OPS-2
    s = site(tmp_path, SCENARIO)
    with in_thread(s) as (url, led):
        web = Web(url)
        sid = _start(web)
        web.approval(sid)
        r = web.post(f"/api/sessions/{sid}/interrupt")
        assert r.status_code == 200 and r.json()["observations"]["stopping"] is True
        web.idle(sid)
        info = next(i for i in led.sessions() if i.id == sid)
        answers = led.records(info.scope, "event", kinds=("approval_answer",))
        assert answers[-1].body["granted"] is False
        assert "interrupted" in answers[-1].body["reason"]
        assert (s.work / "notes.txt").read_text() == "hello\n"
        r = web.post(f"/api/sessions/{sid}/interrupt")
        assert r.json()["observations"]["stopping"] is False


def test_the_models_catalog_never_lists_the_steering_operations(tmp_path: Path) -> None:
    # covers: OPS-6
    s = site(tmp_path)
    with open_ledger(s.ledger_path) as led:
        runtime = Runtime.open(led, config=s.operator(), need_model=False)
        names = set(runtime.registry.catalog("model").names)
        assert not names & {"prompt", "interrupt", "approve"}
        assert {"prompt", "interrupt", "approve"} <= set(runtime.registry.catalog("api").names)
        assert not {"prompt", "interrupt", "approve"} & set(runtime.registry.catalog("tui").names)
        # A model that guesses one is refused by the judge, and the refusal is receipted.
        runtime.start("hi")
        args = {"request": "0" * 32, "granted": True}
        call = ToolCall("g1", "approve", json.dumps(args))
        house = runtime.house()
        outcome = house.run(call, Actor.user("model"), surface="model")
        receipt = house.record(outcome, append_result=False)
        assert outcome.result.is_error and receipt.status != "ok"
        assert led.records(runtime.need_scope(), "event", kinds=("approval_answer",)) == []


def test_always_allows_that_subject_and_a_resume_needs_no_prompt(tmp_path: Path) -> None:
    # covers: RES-1, SRF-1, OPS-2
    script = [
        {"content": [tool("e1", "Edit", path="notes.txt", old_string="hello", new_string="hi")]},
        {"content": [tool("e2", "Edit", path="notes.txt", old_string="hi", new_string="hey")]},
        {"content": [say("Edited twice.")]},
    ]
    s = site(tmp_path, script)
    with in_thread(s) as (url, led):
        web = Web(url)
        sid = _start(web)
        asked = web.approval(sid)
        body = {"granted": True, "always": True}
        r = web.post(f"/api/sessions/{sid}/approvals/{asked['id']}", body)
        assert r.status_code == 200, r.text
        web.idle(sid)
        assert (s.work / "notes.txt").read_text() == "hey\n"
        info = next(i for i in led.sessions() if i.id == sid)
        # One question: the second Edit of the same file was allowed by the rule "always" added.
        assert len(led.records(info.scope, "event", kinds=("approval_request",))) == 1
        (rule,) = led.records(info.scope, "event", kinds=("rule_added",))
        assert rule.body["rule"] == "Edit(notes.txt)" and rule.body["by"].startswith("local:")
        assert led.session(info.scope).status == "finished"  # type: ignore[union-attr]
        # A resume without a prompt: the finished session does not call the model (RES-1).
        requests = len(led.requests(info.scope))
        r = web.post(f"/api/sessions/{sid}/prompts", {})
        assert r.status_code == 200 and "resuming" in r.json()["text"]
        web.idle(sid)
        assert len(led.requests(info.scope)) == requests


def test_the_events_say_what_the_tui_shows(tmp_path: Path) -> None:
    # covers: SRF-1
    import threading

    import httpx

    s = site(tmp_path, [*READS, *SCENARIO[:4]])  # READS: enough for /compact to store one
    with in_thread(s) as (url, _):
        web = Web(url)
        sid = _start(web)
        kinds: list[str] = []
        data: list[str] = []
        opened = threading.Event()

        def follow() -> None:
            with (
                httpx.Client(base_url=url, timeout=60) as client,
                client.stream("GET", f"/api/sessions/{sid}/live", params={"after": 0}) as r,
            ):
                opened.set()
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        kinds.append(line[6:].strip())
                    elif line.startswith("data:"):
                        data.append(line[5:])
                    if "compaction" in kinds:
                        return

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        opened.wait(30)
        edit = web.approval(sid)
        web.post(f"/api/sessions/{sid}/approvals/{edit['id']}", {"granted": True})
        bash = web.wait("the Bash ask", lambda: web.approval(sid)["id"] != edit["id"])
        assert bash
        web.post(f"/api/sessions/{sid}/approvals/{web.approval(sid)['id']}", {"granted": False})
        web.idle(sid)
        assert web.post(f"/api/sessions/{sid}/commands/compact").status_code == 200
        reader.join(60)
        expected = {"hello", "working", "turn", "delta", "streamed", "call", "approval"}
        expected |= {"judged", "executed", "result", "output", "operation", "stopped"}
        expected |= {"work", "compaction"}
        assert expected <= set(kinds), set(kinds)
        streamed = [d for d, k in zip(data, kinds, strict=False) if k == "delta"]
        assert any("Looking at the notes." in d for d in streamed)
        asked = [d for d, k in zip(data, kinds, strict=False) if k == "approval"]
        assert "+hello web" in asked[0] and "rm -rf build" in asked[1]


def test_a_work_step_is_told_and_shown_in_the_tree(tmp_path: Path) -> None:
    # covers: SRF-1
    script = [
        {"content": [tool("w1", "WorkStepRun", objective="Say hello from a step.")]},
        {"content": [tool("w2", "WorkStepWait")]},
        {"content": [say("The step said hello.")]},
    ]
    s = site(tmp_path, script, serve={"modes": ["ask", "trusted"]})
    for spec in s.models:
        children = Path(spec.removeprefix("script:") + ".children")
        children.mkdir()
        (children / "1.jsonl").write_text(json.dumps({"content": [say("hello")]}) + "\n")
    with in_thread(s) as (url, led):
        web = Web(url)
        sid = _start(web, mode="trusted")
        gauge = web.idle(sid)
        assert "error" not in gauge, gauge
        work = web.get(f"/api/sessions/{sid}/work").json()
        (step,) = work["steps"]
        assert step["n"] == 1 and step["status"] == "finished", step
        info = next(i for i in led.sessions() if i.id == sid)
        assert led.session(info.scope).status == "finished"  # type: ignore[union-attr]
        # The worker told the page when it delegated (the events are kept for a reconnect).
        kinds = []
        with web.http.stream("GET", f"/api/sessions/{sid}/live", params={"after": 0}) as r:
            for line in r.iter_lines():
                if line.startswith("event:"):
                    kinds.append(line[6:].strip())
                if kinds and kinds[-1] == "stopped":
                    break
        assert "child_started" in kinds
