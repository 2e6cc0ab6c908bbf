"""The page's small things from the trial (issue 32, item 11), in Debian's chromium: status pills
on one line, the Approvals page showing the diff, the Run page starting with the server's engine,
an icon, an output shown once when the page opened mid-run, a per-turn chart that keeps its
last label, and approval buttons on screen at 1400 x 900."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from comal.ledger import StepInput, UsageInput, open_ledger
from comal.messages import Message, ToolCall
from comal.serve._web_events import LiveEvents
from comal.tokens import Usage

from ._web_support import SCENARIO, Process, Web, chromium, in_thread, say, site, tool

WIDE = {"width": 1400, "height": 900}
LONG = "".join(f"line {i} of a file long enough to need its own scroll box\n" for i in range(120))


def _ready(page: Any, selector: str, text: str = "") -> None:
    # The page's CSP refuses eval, so no wait_for_function: a locator waits.
    page.locator(selector, has_text=text).first.wait_for(timeout=30_000)


def test_status_pills_stay_on_one_line_beside_long_titles(tmp_path: Path) -> None:
    # covers: SRF-1
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])
    with open_ledger(s.ledger_path) as led:
        for i in range(4):
            title = f"session {i}: " + "a title far longer than the side column is wide " * 3
            led.create_session("local", "comal", title=title, status="finished")
    with in_thread(s) as (url, _), chromium() as browser:
        sid = Web(url).post("/api/sessions", {"prompt": "hi"}).json()["session"]
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/chat/{sid}")
        _ready(page, "#others li .status")
        lines = page.locator(".status").evaluate_all(
            "(els) => els.map((e) => [e.textContent, e.getClientRects().length,"
            " e.getBoundingClientRect().height])"
        )
        assert len(lines) >= 4, lines
        for text, boxes, height in lines:
            assert boxes == 1 and height < 30, (text, boxes, height)


def test_the_approvals_page_shows_the_diff_and_the_command(tmp_path: Path) -> None:
    # covers: SRF-1, OPS-2
    s = site(tmp_path)  # SCENARIO: an Edit of notes.txt asks first
    with in_thread(s) as (url, _), chromium() as browser:
        web = Web(url)
        sid = web.post("/api/sessions", {"prompt": "greet the web"}).json()["session"]
        web.approval(sid)
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/approvals")
        _ready(page, ".approval pre.diff", "+hello web")
        card = page.inner_text(".approval")
        assert "-hello" in card and "old_string" not in card, card
        button = page.locator(".approval button.approve").bounding_box()
        assert button is not None and button["y"] + button["height"] <= WIDE["height"]
        page.click(".approval button.approve")  # answered from here, as before
        web.wait("the Bash ask", lambda: web.approval(sid)["operation"] == "Bash")
        page.goto(f"{url}/#/approvals")
        _ready(page, ".approval pre.command", "$ rm -rf build")


def test_the_run_page_starts_sessions_with_the_servers_engine(tmp_path: Path) -> None:
    # covers: SRF-1, CFG-1
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])
    server = Process(s, None, "--engine", "dag")
    server.start()
    try:
        with chromium() as browser:
            page = browser.new_page(viewport=WIDE)
            page.goto(server.url + "/#/run")
            _ready(page, "#new-session")
            assert page.input_value("#new-engine") == "dag"
            page.fill("#new-prompt", "Say nothing.")
            page.click("#new-session button[type=submit]")
            _ready(page, "#transcript .line")
            sid = page.url.rsplit("/", 1)[-1]
        assert Web(server.url).get(f"/api/sessions/{sid}").json()["engine"] == "dag"
    finally:
        server.kill()


def test_the_page_has_an_icon_and_asks_for_nothing_missing(tmp_path: Path) -> None:
    # covers: SRF-1
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])
    with in_thread(s) as (url, _), chromium() as browser:
        page = browser.new_page(viewport=WIDE)
        missing: list[str] = []
        page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        page.goto(url + "/#/run")
        _ready(page, "#new-session")
        icon_link = page.get_attribute("link[rel=icon]", "href")
        assert missing == [] and icon_link, (missing, icon_link)
        # What a browser asks for whatever the page links, and what the page links.
        for path in ("/favicon.ico", icon_link):
            icon = Web(url).get(path)
            assert icon.status_code == 200, path
            assert icon.headers["content-type"].startswith("image/svg+xml"), icon.headers


def test_an_output_shows_once_when_the_page_opened_mid_run(tmp_path: Path) -> None:
    # covers: SRF-1
    script = [{"content": [tool("r1", "Read", path="notes.txt")]}, {"content": [say("Read.")]}]
    s = site(tmp_path, script)
    with in_thread(s) as (url, led), chromium() as browser:
        web = Web(url)
        sid = web.post("/api/sessions", {"prompt": "read the notes"}).json()["session"]
        web.idle(sid)
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/chat/{sid}")
        _ready(page, "#transcript .line.output")
        # What the worker writes just after the transcript the page read: the same call's
        # events, as when the page opens between a result stored and its events written.
        scope = next(i.scope for i in led.sessions() if i.id == sid)
        live = LiveEvents(led, scope)
        live.emit("call", name="Read", arguments=json.dumps({"path": "notes.txt"}))
        live.emit("judged", call_id="r1")
        live.emit("executed", call_id="r1")
        live.emit("result", text="Read: ok (allow by mode:ask)")
        live.emit("output", text=NOTES_READ)
        _ready(page, "#transcript .line.result", "Read: ok")
        page.wait_for_timeout(300)  # events are drawn in order: nothing of them is left
        outputs = page.locator("#transcript .line.output").count()
        calls = page.locator("#transcript .line.call").count()
        assert (outputs, calls) == (1, 1), page.inner_text("#transcript")


NOTES_READ = "1\thello\n"


def test_the_per_turn_chart_keeps_every_bar_and_its_last_label(tmp_path: Path) -> None:
    # covers: OBS-1
    s = site(tmp_path, [{"content": [say("Nothing to change.")]}])
    turns = 150
    with open_ledger(s.ledger_path) as led:
        scope = led.create_session("local", "comal", title="many turns")
        steps = [StepInput([Message.user("go")])]
        for i in range(turns):
            used = Usage(
                new_input=1_000 + 10 * i, cache_read=0, cache_write=0, output=5, reasoning=None
            )
            usage = UsageInput(used, model="m")
            call = ToolCall(f"c{i}", "Bash", json.dumps({"command": f"echo {i}"}))
            reply = [Message.assistant("", call), Message.tool(f"c{i}", str(i))]
            steps.append(StepInput(reply, usages=[usage]))
        led.append_steps(scope, steps)
        sid = scope.session
    with in_thread(s) as (url, _), chromium() as browser:
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/s/{sid}")
        _ready(page, "#turns-chart rect.sent")
        outside = page.locator("#turns-chart").evaluate(
            "(svg) => { const w = svg.viewBox.baseVal.width;"
            " return [...svg.querySelectorAll('rect, text')].map((e) => e.getBBox())"
            ".filter((b) => b.x < 0 || b.x + b.width > w + 0.5).length; }"
        )
        labels = page.locator("#turns-chart text").evaluate_all(
            "(els) => els.map((e) => e.textContent)"
        )
        assert outside == 0 and str(turns - 1) in labels, (outside, labels[-5:])


def test_approval_buttons_are_on_screen_at_1400_by_900(tmp_path: Path) -> None:
    # covers: SRF-1, OPS-2
    script = [
        {"content": [say("Writing the long file."), tool("w1", "Write", path="long.txt",
                                                          content=LONG)]},
        *SCENARIO[3:4],
    ]  # fmt: skip
    s = site(tmp_path, script)
    with in_thread(s) as (url, _), chromium() as browser:
        web = Web(url)
        sid = web.post("/api/sessions", {"prompt": "write it"}).json()["session"]
        web.approval(sid)
        page = browser.new_page(viewport=WIDE)
        page.goto(f"{url}/#/chat/{sid}")
        _ready(page, ".ask pre.diff", "+line 119")
        for name in ("approve", "deny"):
            box = page.locator(f".ask button.{name}").bounding_box()
            assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
        page.click(".ask button.approve")
        web.idle(sid)
        assert (s.work / "long.txt").read_text() == LONG
