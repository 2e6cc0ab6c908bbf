"""The dashboard in a real browser: Debian's chromium driven by Playwright (nothing downloaded).

# covers: OPS-2, OBS-1, CCH-2

Opens the sessions list, a session (timeline and per-turn chart), one turn's context view and
the approvals view; approves a pending ask and sees the agent finish. Screenshots go to
``$COMAL_SCREENSHOTS`` when set (``make screenshots`` writes them into docs/).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from comal.importers import load, store
from conftest import corpus_dir

from ._support import asking_agent, drive_long_session, long_session_script, proxy

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TURNS = 48  # references first, then enough of them for a checkpoint
PROMPT = ("new_input", "cache_read", "cache_write")  # what a request's input measured


def _shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("COMAL_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def test_dashboard_pages_and_an_approval_in_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.exists() or shutil.which("chromium") is None:
        pytest.skip(
            "Debian's chromium is missing: `.ci/run` installs it (apt-get install chromium)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed: the chrome extra (make installs it)",
    )
    shots = _shots(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    with proxy(tmp_path, long_session_script(TURNS), context_window=8_000) as px:
        sid = drive_long_session(px.url, TURNS)
        turns = px.ledger.requests(px.ledger.sessions()[0].scope)
        # A model without a list price: its cost is unknown, never another model's rates.
        px.fake.add({"content": "ok", "usage": {"input_tokens": 900, "output_tokens": 3}})
        chat = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}
        other = httpx.post(f"{px.url}/v1/chat/completions", json=chat).headers["x-comal-session"]
        referenced = next(i for i, r in enumerate(turns) if r.meta.get("referenced"))
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            page = browser.new_page(viewport={"width": 1320, "height": 900})
            page.goto(px.url + "/")
            page.wait_for_selector("#sessions tbody tr.click")
            assert sid[:8] in page.inner_text("#sessions")
            assert "$0." in page.inner_text(f"tr[data-href='#/s/{sid}']")
            unknown = page.locator(f"tr[data-href='#/s/{other}'] span.unknown")
            assert unknown.inner_text() == "—"
            assert "deepseek-chat has no list price" in str(unknown.get_attribute("title"))
            page.screenshot(path=str(shots / "serve-sessions.png"), full_page=True)

            page.click(f"tr[data-href='#/s/{sid}']")
            page.wait_for_selector("#turns-chart rect.sent")
            assert page.locator("#turns-chart rect.sent").count() == len(turns)
            assert page.locator(".timeline li.checkpoint").count() >= 1
            assert page.locator(".timeline li.tool").count() == TURNS
            page.screenshot(path=str(shots / "serve-session.png"), full_page=False)

            page.goto(f"{px.url}/#/s/{sid}/t/{len(turns) - 1}")
            page.wait_for_selector("#turn-chart rect.cell")
            assert page.locator("#turn-chart rect.ckpt").count() > 0
            page.goto(f"{px.url}/#/s/{sid}/t/{referenced}")
            page.wait_for_selector("#turn-chart rect.ref")
            assert page.locator("#turn-chart rect.ref").count() >= 1
            assert page.locator("#turn-chart rect.sent").count() >= 1
            page.screenshot(path=str(shots / "serve-turn.png"), full_page=True)

            agent = asking_agent(tmp_path / "ledger.db", work, command="echo approved-in-browser")
            page.goto(px.url + "/#/approvals")
            page.wait_for_selector(".approval button.approve", timeout=20_000)
            assert "echo approved-in-browser" in page.inner_text(".approval")
            page.screenshot(path=str(shots / "serve-approvals.png"), full_page=False)
            page.click(".approval button.approve")
            page.wait_for_selector("#no-approvals", timeout=20_000)
            result = agent.join()
            assert result.get("status") == "finished", result
            page.goto(f"{px.url}/#/s/{agent.scope.session}")
            page.wait_for_selector(".timeline li.receipt")
            text = page.inner_text(".timeline")
            assert "approved-in-browser" in text
            # A human approval reads as theirs, not as the mode that asked them (DRV-5).
            assert "receipt · Bash b1 · ok · approved by user local:" in text
            page.goto(px.url + "/")
            page.wait_for_selector("#sessions tbody tr.click")
            assert "finished" in page.inner_text("#sessions")
            browser.close()


def test_imported_sessions_read_at_1400_px_and_on_a_phone(tmp_path: Path) -> None:
    # covers: OBS-1
    # Issue 19 item 16: the sessions table was clipped at 1,400 px and on a phone, and an
    # imported session's chart drew every bar full on a 0-1 axis (it read only what the proxy
    # records, which an import has not).
    if not CHROMIUM.exists() or shutil.which("chromium") is None:
        pytest.skip(
            "Debian's chromium is missing: `.ci/run` installs it (apt-get install chromium)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="playwright is not installed: the chrome extra (make installs it)",
    )
    runs = sorted((corpus_dir() / "mini-swe-agent").glob("deepseek-chat__*.json"))[:3]
    with proxy(tmp_path, []) as px:
        for run in runs:
            store(px.ledger, load(run))
        (info,) = [s for s in px.ledger.sessions() if px.ledger.requests(s.scope)][:1]
        turns = httpx.get(f"{px.url}/api/sessions/{info.id}/turns").json()["turns"]
        measured = max(sum(t["usage"][k] or 0 for k in PROMPT) for t in turns)
        assert measured > 0
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            for width, height in ((1400, 900), (390, 844)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(px.url + "/")
                page.wait_for_selector("#sessions tr.click")
                scroll = page.evaluate("document.documentElement.scrollWidth")
                assert scroll <= width, f"the sessions page is {scroll} px wide at {width}"
                titles = page.inner_text("#sessions")
                assert "django" in titles or "astropy" in titles  # titles, not file paths
                page.close()
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{px.url}/#/s/{info.id}")
            page.wait_for_selector("#turns-chart")
            chart = page.inner_text(".legend") + page.inner_html("#turns-chart")
            assert "imported run" in chart
            # The axis runs to the largest measured input, not to 1.
            assert f">{measured:,}<" in chart
            browser.close()
