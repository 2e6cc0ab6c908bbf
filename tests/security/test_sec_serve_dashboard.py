"""Issue 18: what the dashboard shows and which scripts share its origin, in a real chromium.

- The approval card showed a command's raw U+202E (RIGHT-TO-LEFT OVERRIDE): the text a human
  approves read otherwise than the command that runs. Bidi controls, zero-width and control
  characters in model or tool text are now shown as visible code points, everywhere.
- ``/docs`` loaded Swagger UI from a third-party CDN, unpinned and without integrity checks
  (and broken offline), on the same origin as the dashboard, whose key sat in ``localStorage``
  where any script of that origin reads it. No third-party script is served now (the API's
  schema is browsed in the dashboard), and the key lives in the tab's ``sessionStorage`` and
  travels in a header only, never in a URL.
"""

# covers: SRF-1

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from serve._support import asking_agent, proxy

from ._serve_support import BODY, chromium

RLO = "\u202e"
COMMAND = f"echo 'all is well' #{RLO} ;)txt.exe"


def test_bidi_and_control_characters_are_shown_not_obeyed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tricky = f"look: gnp.{RLO}exe\x1b[2J\u2066hidden\u2069 zero\u200bwidth"
    with proxy(tmp_path, [{"content": f"done {RLO}"}]) as px:
        body = {**BODY, "messages": [{"role": "user", "content": tricky}]}
        assert httpx.post(px.url + "/v1/messages", json=body).is_success
        (proxied,) = px.ledger.sessions()
        agent = asking_agent(tmp_path / "ledger.db", work, command=COMMAND)
        with chromium() as browser:
            page = browser.new_page()
            page.goto(px.url + "/#/approvals")
            page.wait_for_selector(".approval button.approve", timeout=20_000)
            card = page.inner_text(".approval")
            assert RLO not in card, "the approval card obeys a bidi override"
            assert "[U+202E]" in card and "all is well" in card
            page.click(".approval button.approve")
            page.wait_for_selector("#no-approvals", timeout=20_000)
            page.goto(f"{px.url}/#/s/{proxied.id}")
            page.wait_for_selector(".timeline li.user")
            shown = page.inner_text(".timeline")
            for hidden in (RLO, "\x1b", "\u2066", "\u2069", "\u200b"):
                assert hidden not in shown, repr(hidden)
            assert "[U+202E]" in shown and "[U+001B]" in shown and "[U+2066]" in shown
        assert agent.join().get("status") == "finished"


def test_no_third_party_script_on_the_dashboard_origin(tmp_path: Path) -> None:
    with proxy(tmp_path, []) as px:
        docs = httpx.get(px.url + "/docs", follow_redirects=True)
        assert docs.status_code == 200 and "cdn." not in docs.text
        assert "script-src 'self'" in docs.headers["content-security-policy"]
        assert httpx.get(px.url + "/openapi.json").json()["paths"]["/api/sessions"]
        with chromium() as browser:
            page = browser.new_page()
            seen: list[str] = []
            page.on("request", lambda r: seen.append(r.url))
            page.goto(px.url + "/docs")
            page.wait_for_selector("#api tbody tr")  # /docs leads to the API's schema
            assert "/api/sessions/{session_id}/entries" in page.inner_text("#api")
            here = urlsplit(px.url).netloc
            foreign = [u for u in seen if urlsplit(u).netloc != here]
            assert foreign == [], f"the dashboard fetched from other origins: {foreign}"


def test_the_key_stays_out_of_local_storage_and_urls(tmp_path: Path) -> None:
    with proxy(tmp_path, [{"content": "hello"}]) as px:
        _, key = px.ledger.add_proxy_key("acme")
        assert httpx.post(px.url + "/v1/messages", json=BODY, headers={"x-comal-key": key})
        with chromium() as browser:
            page = browser.new_page()
            seen: list[str] = []
            page.on("request", lambda r: seen.append(r.url))
            page.goto(px.url + "/")
            page.wait_for_selector("#key-dialog[open]")
            page.fill("#key-input", key)
            page.click("#key-dialog button")
            page.wait_for_selector("#sessions tbody tr.click")
            page.wait_for_function("document.getElementById('live').classList.contains('on')")
            stored = page.evaluate(
                "JSON.stringify([localStorage.getItem('comal-key'), "
                "sessionStorage.getItem('comal-key')])"
            )
            assert json.loads(stored) == [None, key]
            assert [u for u in seen if key in u] == [], "the key travelled in a URL"
