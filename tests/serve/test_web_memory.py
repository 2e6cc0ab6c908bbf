"""The web page's memory (DRV-7): ``# TEXT`` typed into the prompt box remembers a note for the
session's agent instead of sending it, ``/memory`` lists (or searches) the agent's memories,
``/forget ID`` forgets one — through the routes, scoped to the caller's tenant and CSRF-guarded,
and in Debian's chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from comal.ledger import open_ledger

from ._web_support import Web, chromium, in_thread, say, site

SHORT: list[dict[str, Any]] = [{"content": [say("Hello from the agent.")]}] * 4


def _session(web: Web) -> str:
    r = web.post("/api/sessions", {"prompt": "say hello"})
    assert r.status_code == 201, r.text
    sid = str(r.json()["session"])
    web.idle(sid)
    return sid


def test_the_memory_routes_are_the_callers_agents(tmp_path: Path) -> None:
    # covers: DRV-7, LED-2, SRF-1
    s = site(tmp_path, SHORT)
    with open_ledger(s.ledger_path) as led:
        _, key_a = led.add_proxy_key("acme")
        _, key_b = led.add_proxy_key("other")
    with in_thread(s) as (url, led):
        a, b = Web(url, key_a), Web(url, key_b)
        sid = _session(a)
        base = f"/api/sessions/{sid}/memories"
        r = a.post(base, {"text": "deploys go through scripts/ship.sh"})
        assert r.status_code == 201, r.text
        added = r.json()
        memory = added["memory"]
        assert added["added"] and memory["kind"] == "note" and memory["session"] is None
        assert memory["source"].startswith("user:acme:")  # the key that proved the tenant
        assert "remembered as memory" in added["text"] and "/forget" in added["text"]
        assert a.post(base, {"text": "deploys go through scripts/ship.sh"}).status_code == 200
        listed = a.get(base).json()
        assert [m["id"] for m in listed["memories"]] == [memory["id"]]
        found = a.get(base, params={"q": "ship.sh"}).json()
        assert found["results"][0]["match"]["how"] == "exact"
        # Another tenant's caller, a missing token, a named actor: refused, nothing written.
        assert b.get(base).status_code == 404
        assert b.post(base, {"text": "planted"}).status_code == 404
        assert b.post(f"{base}/{memory['id']}/forget", {}).status_code == 404
        bare = a.http.post(base, json={"text": "no token"})
        assert bare.status_code == 403 and bare.json()["error"]["code"] == "CSRF_TOKEN"
        assert a.post(base, {"text": "x", "by": "root"}).status_code == 422
        r = a.post(f"{base}/999999/forget", {"why": "none"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "MEMORY_NOT_FOUND"
        # Forget: recorded, then neither listed nor found; listed with forgotten=true.
        r = a.post(f"{base}/{memory['id']}/forget", {"why": "moved"})
        assert r.status_code == 200 and r.json()["new"] and "forgot memory" in r.json()["text"]
        assert a.get(base).json()["memories"] == []
        assert a.get(base, params={"q": "ship.sh"}).json()["results"] == []
        every = a.get(base, params={"forgotten": "true"}).json()["memories"]
        assert every[0]["forgotten"]["why"] == "moved"
        info = next(i for i in led.sessions() if i.id == sid)
        texts = [m.text for m, _ in led.agent_memories(info.tenant, info.agent, forgotten=True)]
        assert texts == ["deploys go through scripts/ship.sh"]  # "planted" never written


def test_a_person_remembers_and_forgets_from_the_page(tmp_path: Path) -> None:
    # covers: DRV-7, SRF-1
    s = site(tmp_path, SHORT)
    with in_thread(s) as (url, led), chromium() as browser:
        sid = _session(Web(url))
        page = browser.new_page()
        page.goto(f"{url}/#/chat/{sid}")
        page.wait_for_selector("#prompt")
        page.fill("#prompt", "# the staging host is stg-2")
        page.press("#prompt", "Enter")
        said = page.locator(".line.memory", has_text="remembered as memory").first
        said.wait_for(timeout=30_000)
        assert "a note of agent" in said.inner_text()
        page.fill("#prompt", "/memory stg-2")
        page.press("#prompt", "Enter")
        page.locator(".line.memory", has_text="[exact] memory").first.wait_for(timeout=30_000)
        page.fill("#prompt", "/forget 1 wrong host")
        page.press("#prompt", "Enter")
        page.locator(".line.memory", has_text="forgot memory 1").first.wait_for(timeout=30_000)
        info = next(i for i in led.sessions() if i.id == sid)
        ((memory, gone),) = led.agent_memories(info.tenant, info.agent, forgotten=True)
        assert memory.text == "the staging host is stg-2" and gone is not None
        assert gone.why == "wrong host"
        # Nothing of it reached the agent as a prompt.
        prompts = [e.message.text for e in led.entries(info.scope) if e.role == "user"]
        assert len(prompts) == 1 and prompts[0].endswith("say hello")
