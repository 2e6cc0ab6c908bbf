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

