"""CCH-4: cache breakpoints start at the 5-minute TTL and move to 1 hour once a session proves
active, never back; over real HTTP through the official Anthropic SDK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _cache_support import answer, bash, claude, events, runtime
from comal.agent import RETENTION_EVENT, CacheConfig, Config
from comal.ledger import open_ledger
from comal.testing import FakeServer

# covers: CCH-4


def _ttls(body: dict[str, Any]) -> set[str | None]:
    """The TTL of every cache_control marker in a request body (None: the provider's default)."""
    found: set[str | None] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "cache_control" in node:
                assert node["cache_control"]["type"] == "ephemeral"
                found.add(node["cache_control"].get("ttl"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk({k: body[k] for k in ("system", "tools", "messages") if k in body})
    return found


def test_breakpoints_move_from_5m_to_1h_and_stay_there_after_a_resume(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = [bash("c1", "true"), bash("c2", "true"), bash("c3", "true"), answer("done")]
    led = open_ledger(tmp_path / "l.db")
    with FakeServer([*script, answer("again")]) as server, claude(server) as provider:
        rt = runtime(led, ws, provider, config=Config(cache=CacheConfig(promote_after_turns=3)))
        assert rt.run("work").status == "finished"
        assert rt.scope is not None
        # A new process resumes the session: the promotion was recorded, so it keeps 1h.
        again = runtime(led, ws, provider, resume=rt.scope.session)
        assert again.run("more").status == "finished"
        ttls = [_ttls(r.body) for r in server.requests]
    assert ttls == [{"5m"}, {"5m"}, {"5m"}, {"1h"}, {"1h"}]
    promoted = events(led, rt.scope, RETENTION_EVENT)
    assert [(e["ttl"], e["after_requests"]) for e in promoted] == [("1h", 3)]
    metas = [r.meta["cache_ttl"] for r in led.requests(rt.scope)]
    assert metas == ["5m", "5m", "5m", "1h", "1h"]
    led.close()


def test_a_new_session_starts_short_and_retention_can_be_switched_off(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    led = open_ledger(tmp_path / "l.db")
    off = Config(cache=CacheConfig(adaptive_retention=False))
    with FakeServer([answer("a"), answer("b")]) as server, claude(server) as provider:
        assert runtime(led, ws, provider).run("one").status == "finished"
        assert runtime(led, ws, provider, config=off).run("two").status == "finished"
        ttls = [_ttls(r.body) for r in server.requests]
    # Switched off, the markers carry no TTL: the provider's default applies.
    assert ttls == [{"5m"}, {None}]
    led.close()
