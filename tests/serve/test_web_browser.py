"""The web interface in a real browser: Debian's chromium under Playwright (nothing downloaded).

A person starts a session in a temporary workspace with a scripted model, sends a prompt,
watches the model's text arrive, approves an Edit from its diff, denies a Bash, sees the board
change, runs /compact, switches /model, kills the server mid-turn (an approval pending),
restarts it and finishes the session from the page. Screenshots go to ``docs/web/`` when
``COMAL_SCREENSHOTS`` names it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from comal.ledger import open_ledger

from ._web_support import READS, SCENARIO, Process, Web, chromium, in_thread, say, site, tool

WAIT_FOR_GO = "while [ ! -f go ]; do sleep 0.05; done; echo went"

WIDE = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def _shots(tmp_path: Path) -> Path:
    target = Path(os.environ.get("COMAL_SCREENSHOTS") or tmp_path / "shots")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _shows(page: Any, selector: str, text: str) -> None:
    # The page's CSP refuses eval, so no wait_for_function: a locator waits for the text.
    page.locator(selector, has_text=text).first.wait_for(timeout=30_000)


def test_a_person_runs_steers_and_finishes_a_session_from_the_page(tmp_path: Path) -> None:
    # covers: SRF-1, OPS-2, OPS-6, RES-1, RES-2
    s = site(tmp_path, [*READS, *SCENARIO])  # READS: enough for /compact to store one
    shots = _shots(tmp_path)
    server = Process(s)
    server.start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport=WIDE)
            page.goto(server.url + "/#/run")
            page.wait_for_selector("#new-session")
            page.fill("#new-prompt", "Make notes.txt greet the web.")
            page.screenshot(path=str(shots / "web-start.png"))
            page.click("#new-session button[type=submit]")
            page.wait_for_selector("#transcript")
            sid = page.url.rsplit("/", 1)[-1]

            # The Edit's approval shows its diff; the model's text streamed before it.
            page.wait_for_selector(".ask pre.diff", timeout=30_000)
            assert "+hello web" in page.inner_text(".ask pre.diff")
            # The text streamed before the call; the page may draw the ask a moment before the
            # streamed line lands (two event kinds): it must show up, not be lost.
            _shows(page, "#transcript", "Looking at the notes.")
            # 'Always' offers the rule this exact file would get, as the TUI's dialog does.
            assert "allow Edit(notes.txt)" in page.inner_text(".ask")
            page.wait_for_selector("#others li")
            page.wait_for_selector("#gauge-text")
            page.screenshot(path=str(shots / "web-approve-edit.png"), full_page=True)
            page.click(".ask button.approve")

            # The Bash's approval shows the exact command; deny it.
            page.wait_for_selector(".ask pre.command", timeout=30_000)
            assert "$ rm -rf build" in page.inner_text(".ask pre.command")
            page.screenshot(path=str(shots / "web-deny-bash.png"), full_page=True)
            page.click(".ask button.deny")

            _shows(page, "#board li", "notes greet the web")
            _shows(page, "#board li", "done")
            _shows(page, "#transcript .line", "Done: notes.txt greets the web.")
            assert (s.work / "notes.txt").read_text() == "hello web\n"
            # The refused Bash's output (collapsed) is an error the model reads.
            _shows(page, ".line.output.err summary", "Bash output")
            page.wait_for_selector("#gauge-text")
            page.screenshot(path=str(shots / "web-chat.png"))

            # /compact and /model, typed into the prompt box as in the TUI.
            page.fill("#prompt", "/compact")
            page.press("#prompt", "Enter")
            page.wait_for_selector("pre.command-output")
            assert "checkpoint" in page.inner_text("pre.command-output")
            page.fill("#prompt", f"/model {s.models[1]}")
            page.press("#prompt", "Enter")
            _shows(page, "#gauge-model", s.models[1])

            # A prompt whose Bash waits for an answer: the server is killed mid-turn.
            page.fill("#prompt", "Record that it ran.")
            page.press("#prompt", "Enter")
            page.wait_for_selector(".ask pre.command", timeout=30_000)
            asked = page.get_attribute(".ask", "data-id")
            server.kill()
            server.start()

            page.reload()
            page.wait_for_selector("#transcript .line")
            page.fill("#prompt", "Finish up.")
            page.press("#prompt", "Enter")
            # The call is judged afresh on resume (RES-1): a new approval, the old one answered.
            again = f".ask:not([data-id='{asked}'])"
            page.wait_for_selector(f"{again} pre.command", timeout=30_000)
            assert "echo resumed" in page.inner_text(f"{again} pre.command")
            assert page.locator(f".ask[data-id='{asked}']").count() == 0
            page.click(f"{again} button.approve")
            _shows(page, "#transcript .line", "All done after the restart.")
            page.screenshot(path=str(shots / "web-after-restart.png"))

            phone = browser.new_page(viewport=PHONE)
            phone.goto(f"{server.url}/#/chat/{sid}")
            phone.wait_for_selector("#transcript .line")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE["width"], width
            phone.screenshot(path=str(shots / "web-phone.png"))
    finally:
        server.kill()

    assert (s.work / "after.txt").read_text() == "resumed\n"
    with open_ledger(s.ledger_path) as led:
        info = next(i for i in led.sessions() if i.id == sid)
        assert info.status == "finished"
        kinds = [r.kind for r in led.records(info.scope, "event")]
        assert "lock_cleared" in kinds  # RES-2: the killed server's lock, recorded
        # The approval the killed worker waited on is answered, not left pending forever.
        answers = led.records(info.scope, "event", kinds=("approval_answer",))
        assert any(a.body["by"]["id"] == "comal:web" and not a.body["granted"] for a in answers)
        receipts = {r.body["operation"]: r.body for r in led.records(info.scope, "receipt")}
        for name in ("prompt", "approve", "compact", "model"):
            assert receipts[name]["surface"] == "api"
            assert receipts[name]["actor"]["kind"] == "user"


def test_model_and_tool_text_is_shown_as_text_with_hidden_characters_visible(
    tmp_path: Path,
) -> None:
    # covers: SRF-1
    hostile = 'see <img src=x onerror="document.title=1"> and report\u202etxt.exe\x1b[31m'
    script = [
        {
            "content": [
                say(hostile),
                tool(
                    "e1",
                    "Edit",
                    path="notes.txt",
                    old_string="hello",
                    new_string="<script>document.title=2</script>",
                ),
            ]
        },
    ]
    s = site(tmp_path, script)
    with in_thread(s) as (url, _), chromium() as browser:
        web = Web(url)
        sid = web.post("/api/sessions", {"prompt": "go"}).json()["session"]
        web.approval(sid)
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/chat/{sid}")
        _shows(page, "#transcript .line.said.model", "report")
        said = page.inner_text("#transcript .line.said.model")
        assert "<img src=x" in said and "[U+202E]" in said and "[U+001B]" in said
        assert "\u202e" not in said
        assert "<script>document.title=2</script>" in page.inner_text(".ask pre.diff")
        assert page.locator("#transcript img, .ask script").count() == 0
        assert page.title() == "comal"
        web.post(f"/api/sessions/{sid}/interrupt")
        web.idle(sid)


def test_a_person_steers_queues_and_stops_a_working_agent_from_the_page(tmp_path: Path) -> None:
    # covers: DRV-2, DRV-3, SRF-1
    # While the command waits for a file, its first line shows as it comes; a message sent
    # with Enter and one with Tab show as queued until the agent takes them; then Interrupt
    # stops a `sleep 30` the next turn runs.
    script = [
        {"content": [tool("w1", "Bash", command="echo started; " + WAIT_FOR_GO)]},
        {"content": [say("Noted: the docs too.")]},
        {"content": [tool("s1", "Bash", command="echo slow; sleep 30; echo never")]},
    ]
    s = site(tmp_path, script, mode="trusted")
    shots = _shots(tmp_path)
    with in_thread(s) as (url, led), chromium() as browser:
        page = browser.new_page(viewport=WIDE)
        page.goto(url + "/#/run")
        page.wait_for_selector("#new-session")
        page.fill("#new-prompt", "Start the work.")
        page.click("#new-session button[type=submit]")
        page.wait_for_selector("#transcript")
        _shows(page, "pre.running-output", "started")
        page.fill("#prompt", "also the docs")
        page.press("#prompt", "Enter")
        page.fill("#prompt", "then the changelog")
        page.press("#prompt", "Tab")
        _shows(page, "#queued .line.queued", "then the changelog")
        queued = page.locator("#queued .line.queued").all_inner_texts()
        assert len(queued) == 2
        assert "after the running call" in queued[0] and "also the docs" in queued[0]
        assert "after this run" in queued[1]
        assert page.input_value("#prompt") == ""
        page.screenshot(path=str(shots / "web-queued.png"))
        (s.work / "go").write_text("")
        # Taken: each shows as said, in the order it went in, and no longer as queued.
        _shows(page, "#transcript .line.said.you", "then the changelog")
        _shows(page, "pre.running-output", "slow")
        assert page.locator("#queued .line.queued").count() == 0
        said = page.locator("#transcript .line.said").all_inner_texts()
        order = [t for t in said if "docs" in t or "changelog" in t]
        assert order[:3] == [
            "you: also the docs",
            "comal: Noted: the docs too.",
            "you: then the changelog",
        ]
        page.click("#interrupt")
        # The sleep is stopped now (a bounded wait, well under its thirty seconds).
        stopped = page.locator(".line.output pre", has_text="interrupted by the user")
        stopped.wait_for(state="attached", timeout=10_000)  # collapsed: there, not shown
        _shows(page, "#transcript .line.said", "interrupted the run while Bash ran")
        (info,) = led.sessions()
        bash = [r.body["status"] for r in led.records(info.scope, "receipt", kinds=("Bash",))]
        assert bash == ["ok", "interrupted"]
