"""The web page labels a receipt as the house does: a human's approval as theirs (issue 32 §5)."""

from __future__ import annotations

from pathlib import Path

import httpx

from _ops_support import call, make_setup, propose
from comal.ops import Actor, CallbackApprover, Policy

from ._support import proxy


def test_the_receipts_the_page_shows_say_who_approved(tmp_path: Path) -> None:
    # covers: DRV-5
    approver = CallbackApprover(lambda r: "yes" in r.arguments["command"], by=Actor.user("ana"))
    policy = Policy.from_config(
        {
            "mode": "ask",
            "allow": ["Bash(ls *)"],
            "deny": ["Bash(rm *)"],
            "sandbox": {"allow_unsandboxed": True},
        }
    )
    s = make_setup(
        tmp_path, policy=policy, approver=approver, session="sess-web-labels", tenant="local"
    )
    propose(s, call("Bash", {"command": "ls && echo yes"}, call_id="c1"))
    propose(s, call("Bash", {"command": "ls && echo no"}, call_id="c2"))
    propose(s, call("Bash", {"command": "ls -a && rm -rf x"}, call_id="c3"))
    s.close()
    with proxy(tmp_path, []) as px:
        got = httpx.get(f"{px.url}/api/sessions/sess-web-labels/receipts").json()["receipts"]
        page = httpx.get(f"{px.url}/static/app.js").text
    assert [r["label"] for r in got] == [
        "approved by user ana",
        "refused by user ana",
        'deny by Bash(rm *) on part 2 of 2, "rm -rf x"',
    ]
    # The page prints that label, not "<decision> by <rule>" beside the approver's bare id.
    assert "r.label" in page and "r.judgment.rule" not in page
