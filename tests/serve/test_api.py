"""The HTTP API: sessions, entries, per-turn assembly, records, live events, approvals.

# covers: OPS-2, OPS-3, LED-2, OBS-1
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from comal.serve import APPROVAL_ANSWER

from ._support import asking_agent, proxy


def _wait(fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_openapi_lists_the_api(tmp_path: Path) -> None:
    with proxy(tmp_path, []) as px:
        schema = httpx.get(px.url + "/openapi.json").json()
        paths = set(schema["paths"])
        for path in (
            "/api/sessions",
            "/api/sessions/{session_id}",
            "/api/sessions/{session_id}/entries",
            "/api/sessions/{session_id}/turns",
            "/api/sessions/{session_id}/receipts",
            "/api/sessions/{session_id}/summaries",
            "/api/sessions/{session_id}/events",
            "/api/approvals",
            "/api/approvals/{session_id}/{request_id}",
            "/api/events",
        ):
            assert path in paths, path
        assert "/v1/messages" not in paths
        assert httpx.get(px.url + "/").status_code == 200


def test_sessions_entries_and_turns_of_a_proxied_session(tmp_path: Path) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 10, "cache_read_input_tokens": 500}
    with proxy(tmp_path, [{"content": "hello", "usage": usage}]) as px:
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }
        r = httpx.post(px.url + "/v1/messages", json=body)
        sid = r.headers["x-comal-session"]
        listed = httpx.get(px.url + "/api/sessions").json()["sessions"]
        assert [s["id"] for s in listed] == [sid]
        row = listed[0]
        # A proxied session has no process of comal's holding it: its client owns the loop.
        assert row["engine"] == "limit" and row["status"] == "idle"
        assert row["usage"]["new_input"] == 1000 and row["usage"]["cache_read"] == 500
        assert row["cost_usd"] > 0
        assert (
            httpx.get(px.url + "/api/sessions", params={"status": "finished"}).json()["sessions"]
            == []
        )
        entries = httpx.get(f"{px.url}/api/sessions/{sid}/entries").json()["entries"]
        assert [e["role"] for e in entries] == ["user", "assistant"]
        assert entries[1]["message"]["parts"][0]["text"] == "hello"
        (turn,) = httpx.get(f"{px.url}/api/sessions/{sid}/turns").json()["turns"]
        assert turn["stage"] == "verbatim" and turn["entry_id"] == entries[1]["id"]
        assert turn["input_tokens"] > 0 and turn["window"] == 200_000
        assert turn["metrics"]["tokensLoaded"] == turn["input_tokens"]
        events = httpx.get(f"{px.url}/api/sessions/{sid}/events").json()["events"]
        assert [e["kind"] for e in events] == ["proxy_instructions"]
        assert httpx.get(f"{px.url}/api/sessions/nope").status_code == 404


def test_a_pending_ask_is_answered_over_http_by_the_authenticated_human(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with proxy(tmp_path, []) as px:
        agent = asking_agent(tmp_path / "ledger.db", work)
        with httpx.stream(
            "GET", px.url + "/api/events", params={"interval": 0.05}, timeout=30
        ) as events:
            pending = _wait(lambda: httpx.get(px.url + "/api/approvals").json()["approvals"])
            (ask,) = pending
            assert ask["operation"] == "Bash" and ask["arguments"]["command"] == "echo approved"
            url = f"{px.url}/api/approvals/{ask['session']}/{ask['id']}"
            # A body cannot name who approves (OPS-2).
            token = {"x-comal-csrf": httpx.get(px.url + "/api/web").json()["csrf"]}
            forged = {"granted": True, "by": {"kind": "user", "id": "root"}}
            assert httpx.post(url, json=forged, headers=token).status_code == 422
            # A state-changing route needs the server's token (CSRF).
            assert httpx.post(url, json={"granted": True}).status_code == 403
            done = httpx.post(url, json={"granted": True, "reason": "looks safe"}, headers=token)
            assert done.status_code == 200, done.text
            assert done.json()["by"]["id"].startswith("local:")
            again = httpx.post(url, json={"granted": False}, headers=token)
            assert again.status_code == 409
            # The stream may open before the agent asks: its first change can be empty.
            seen: list[list[str]] = []
            for line in events.iter_lines():
                if line.startswith("data:"):
                    seen.append(json.loads(line[5:])["approvals"])
                    if [ask["id"]] in seen and not seen[-1]:
                        break
            assert seen[seen.index([ask["id"]]) :][-1] == []
        result = agent.join()
        assert result.get("status") == "finished", result
        assert result["answer"] == "The command ran."
        sid = agent.scope.session
        receipts = httpx.get(f"{px.url}/api/sessions/{sid}/receipts").json()["receipts"]
        (receipt,) = [r for r in receipts if r["operation"] == "Bash"]
        assert receipt["status"] == "ok"
        approval = receipt["judgment"]["approval"]
        assert approval["granted"] is True and approval["by"]["id"].startswith("local:")
        answers = px.ledger.records(agent.scope, "event", kinds=(APPROVAL_ANSWER,))
        assert len(answers) == 1
        # The answer is the approve operation's, judged and receipted on the api surface.
        # (the second answer, refused as already given, has its receipt too)
        first, again_r = px.ledger.records(agent.scope, "receipt", kinds=("approve",))
        assert first.body["surface"] == "api" and first.body["status"] == "ok"
        assert first.body["actor"]["id"].startswith("local:")
        assert again_r.body["observations"]["code"] == "APPROVAL_NOT_PENDING"
