"""A cost is priced one way on every surface, and a model without a list price has an unknown
cost (issue 19): the dashboard's sessions priced every non-Claude model at gpt-4.1's rates and
every Claude model at Sonnet's, so a scripted session showed $0.0062 and DeepSeek $3.12."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from comal.agent import Flags, Runtime
from comal.tokens import price_for

from ._support import proxy

USAGE = {"input_tokens": 1000, "output_tokens": 10, "cache_read_input_tokens": 500}


def _scripted(db: Path, tmp_path: Path) -> str:
    """A session of the agent on a script: model, usage and all, no price."""
    from comal.ledger import open_ledger

    script = tmp_path / "s.jsonl"
    reply = {"content": [{"type": "text", "text": "hi"}], "usage": USAGE}
    script.write_text(json.dumps(reply) + "\n")
    with open_ledger(db) as led:
        rt = Runtime.open(led, Flags(model=f"script:{script}", workspace=tmp_path))
        with rt.closing():
            return rt.run("hello").session


def test_the_api_prices_what_has_a_price_and_nothing_else(tmp_path: Path) -> None:
    # covers: CCH-2, TOK-1
    script = [{"content": "hello", "usage": USAGE}, {"content": "hello", "usage": USAGE}]
    with proxy(tmp_path, script) as px:
        claude = {"model": "claude-sonnet-4-5", "max_tokens": 10}
        claude["messages"] = [{"role": "user", "content": "hi"}]
        first = httpx.post(px.url + "/v1/messages", json=claude).headers["x-comal-session"]
        deepseek = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hey"}]}
        second = httpx.post(px.url + "/v1/chat/completions", json=deepseek)
        other = second.headers["x-comal-session"]
        scripted = _scripted(tmp_path / "ledger.db", tmp_path)
        rows = {s["id"]: s for s in httpx.get(px.url + "/api/sessions").json()["sessions"]}
        view = httpx.get(f"{px.url}/api/sessions/{other}").json()
    table = price_for("claude-sonnet-4-5")
    assert table is not None
    paid = (1000 * table.input + 500 * table.cache_read) / table.per_tokens
    assert rows[first]["cost_usd"] == pytest.approx(paid)
    for sid in (other, scripted):
        assert rows[sid]["usage"]["new_input"] is not None  # measured, just not priced
        assert rows[sid]["cost_usd"] is None, rows[sid]
    assert rows[first]["cost_unknown"] == []
    for sid, model in ((other, "deepseek-chat"), (scripted, "script")):
        (why,) = rows[sid]["cost_unknown"]
        assert model in why and "no list price" in why
    assert view["cost_usd"] is None and "deepseek-chat" in view["cost_unknown"][0]
