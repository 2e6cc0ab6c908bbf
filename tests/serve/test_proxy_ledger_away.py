"""``comal serve`` while its PostgreSQL ledger is away: the request that finds the connection
cut is answered with a 503 its client sends again (not a 400, which ends the client's turn), no
upstream call is made for it, and the next is served on a new connection.

Found by ``bench/multihost_faults.py``: after a PostgreSQL restart clients got a 400
LEDGER_UNAVAILABLE ("invalid_request_error") and gave up.
"""

from __future__ import annotations

from typing import Any

import httpx

from _pg_support import fresh_schema, pg_dsn, pg_execute
from comal.ledger import PostgresLedger, verify
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FakeServer


def _cut(led: PostgresLedger, dsn: str) -> None:
    """End the ledger's connection from the server's side."""
    with led._reading() as db:
        pid = int(db.execute("SELECT pg_backend_pid()").fetchone()[0])
    pg_execute(dsn, None, f"SELECT pg_terminate_backend({pid})")


def _cut_before_recording(app: Any, led: PostgresLedger, dsn: str, at: int) -> list[int]:
    """Make the real connection end just before the reply to upstream request ``at`` (1-based)
    is recorded; the list returned counts the cuts made (the attack, mounted)."""
    recorder = app.state.proxy.recorder
    record = recorder.record
    fake_requests: list[int] = []
    cuts: list[int] = []

    def cut_then_record(*args: Any) -> None:
        fake_requests.append(1)
        if len(fake_requests) == at and not cuts:
            _cut(led, dsn)
            cuts.append(1)
        record(*args)

    recorder.record = cut_then_record
    return cuts


def _post(url: str, messages: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": messages}
    headers = {"x-api-key": "sk", "anthropic-version": "2023-06-01", "x-comal-session": "c1"}
    return httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=30)


def test_serve_answers_503_while_the_ledger_is_away_then_goes_on() -> None:
    # covers: SCL-1, LED-4
    dsn = pg_dsn()
    script = [{"content": f"Reply {i}.", "usage": {"input_tokens": 5, "output_tokens": 2}}
              for i in range(2)]  # fmt: skip
    with fresh_schema() as schema, PostgresLedger(dsn, schema=schema) as led:
        with FakeServer(script) as fake:
            config = ServeConfig(upstream_anthropic=fake.anthropic_base_url)
            with ServerThread(create_app(config, ledger=led)) as server:
                messages: list[dict[str, Any]] = [{"role": "user", "content": "q0"}]
                first = _post(server.url, messages)
                assert first.status_code == 200, first.text
                messages += [{"role": "assistant", "content": first.json()["content"][0]["text"]},
                             {"role": "user", "content": "q1"}]  # fmt: skip
                _cut(led, dsn)
                away = _post(server.url, messages)
                assert away.status_code == 503, away.text  # a 400 would end the client's turn
                assert away.headers["x-should-retry"] == "true"
                assert "LEDGER_UNAVAILABLE" in away.json()["error"]["message"]
                again = _post(server.url, messages)  # the client sends it again
                assert again.status_code == 200, again.text
            assert len(fake.requests) == 2  # the refused request never reached upstream
        (info,) = led.sessions()
        stored = [e.message.text for e in led.entries(info.scope)]
        assert stored == ["q0", "Reply 0.", "q1", "Reply 1."]
        assert len(led.requests(info.scope)) == 2
        assert verify(led).ok


def test_a_reply_that_cannot_be_recorded_is_a_503_and_its_retry_is_stored_once() -> None:
    # covers: SCL-1, LED-4
    # The database goes away between the upstream reply and its recording: the client gets a
    # retryable 503 in the provider's shape (not a bare 500), and its retry is stored once.
    dsn = pg_dsn()
    script = [{"content": f"Reply {i}.", "usage": {"input_tokens": 5, "output_tokens": 2}}
              for i in range(3)]  # fmt: skip
    with fresh_schema() as schema, PostgresLedger(dsn, schema=schema) as led:
        with FakeServer(script) as fake:
            app = create_app(ServeConfig(upstream_anthropic=fake.anthropic_base_url), ledger=led)
            cuts = _cut_before_recording(app, led, dsn, at=2)
            with ServerThread(app) as server:
                messages: list[dict[str, Any]] = [{"role": "user", "content": "q0"}]
                first = _post(server.url, messages)
                assert first.status_code == 200, first.text
                messages += [{"role": "assistant", "content": first.json()["content"][0]["text"]},
                             {"role": "user", "content": "q1"}]  # fmt: skip
                lost = _post(server.url, messages)
                assert cuts == [1]
                assert lost.status_code == 503, lost.text
                assert lost.headers["x-should-retry"] == "true"
                assert lost.json()["type"] == "error"
                again = _post(server.url, messages)
                assert again.status_code == 200, again.text
                assert again.json()["content"][0]["text"] == "Reply 2."
        (info,) = led.sessions()
        stored = [e.message.text for e in led.entries(info.scope)]
        assert stored == ["q0", "Reply 0.", "q1", "Reply 2."]
        assert verify(led).ok


def test_a_streamed_reply_that_cannot_be_recorded_ends_in_an_error_event() -> None:
    # covers: SCL-1, LED-4
    # The same, streamed: the reply's end is held back until it is stored, so the client never
    # sees a whole reply the ledger lacks; it gets the protocol's error event instead.
    dsn = pg_dsn()
    script = [{"content": f"Reply {i}.", "usage": {"input_tokens": 5, "output_tokens": 2}}
              for i in range(2)]  # fmt: skip
    with fresh_schema() as schema, PostgresLedger(dsn, schema=schema) as led:
        with FakeServer(script) as fake:
            app = create_app(ServeConfig(upstream_anthropic=fake.anthropic_base_url), ledger=led)
            cuts = _cut_before_recording(app, led, dsn, at=1)
            with ServerThread(app) as server:
                body = {"model": "claude-sonnet-4-5", "max_tokens": 50, "stream": True,
                        "messages": [{"role": "user", "content": "q0"}]}  # fmt: skip
                headers = {"x-api-key": "sk", "x-comal-session": "c1"}
                lost = httpx.post(f"{server.url}/v1/messages", json=body, headers=headers,
                                  timeout=30)  # fmt: skip
                assert cuts == [1]
                assert "event: error" in lost.text and "LEDGER_UNAVAILABLE" in lost.text
                assert "message_stop" not in lost.text
                again = httpx.post(f"{server.url}/v1/messages", json=body, headers=headers,
                                   timeout=30)  # fmt: skip
                assert "message_stop" in again.text and "event: error" not in again.text
        (info,) = led.sessions()
        assert [e.message.text for e in led.entries(info.scope)] == ["q0", "Reply 1."]
        assert verify(led).ok
