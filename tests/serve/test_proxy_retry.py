"""A client's identical retry of a request whose reply was stored but never delivered (issue 18).

When ``comal serve`` died (or the connection broke) after a reply was recorded and before the
client got it, the client's identical retry was taken for a rewind: a child session holding a
copy of the whole history, and the reply stored twice. Now the retry is recognised (the request
record keeps the digest of the request's bytes): the stored reply is given back in the client's
format, whole or streamed, without an upstream call; nothing is stored again; the conversation
goes on in the same session.

# covers: LED-1, LED-3, INT-2
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from comal.ledger import verify
from comal.serve import REPLAY_EVENT
from comal.serve._record import Recorder
from comal.serve._sessions import SessionRouter

from ._conversations import BROKEN, FORMATS, Talk, client_for, said, script_entry
from ._support import proxy


class Dropped(Exception):
    """The reply never reaches the client (raised once it is stored)."""


def _drop_after_record(monkeypatch: pytest.MonkeyPatch, turns: set[int]) -> list[int]:
    """Every ``turns``-th recorded reply (1-based) is stored, then lost on its way."""
    original = Recorder.record
    count: list[int] = []

    def record(self: Recorder, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        count.append(1)
        if len(count) in turns:
            raise Dropped(f"reply {len(count)} stored, not delivered")

    monkeypatch.setattr(Recorder, "record", record)
    return count


@pytest.mark.parametrize(("protocol", "stream"), FORMATS)
def test_an_identical_retry_gets_the_stored_reply_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, stream: bool
) -> None:
    script = [script_entry(k, tool=k == 1) for k in range(3)]
    _drop_after_record(monkeypatch, {2})
    with proxy(tmp_path, script) as px:
        talk = Talk(client_for(protocol, px.url), protocol, stream, "retry")
        px.clients.append(talk.client)
        got, failures = [], 0
        while talk.turns < 3:
            try:
                reply = talk.send()
            except BROKEN:  # a 500, a broken stream or connection
                # (a pooled connection the 500 closed can fail the first retry too)
                failures += 1
                assert failures <= 3
                continue  # the client sends the same request again
            got.append(reply.text)
            talk.accept(reply)
        assert failures >= 1
        assert got == ["reply-0", "reply-1", "reply-2"]
        # The retry went nowhere upstream: one upstream call per reply.
        assert len(px.fake.requests) == 3
        px.fake.assert_complete()
        # One session, no child; each reply stored once; the retry is on record.
        (info,) = px.ledger.sessions()
        assert info.parent is None and "fork_at" not in info.meta
        replies = [said(e.message) for e in px.ledger.entries(info.scope) if e.role == "assistant"]
        assert replies == ["reply-0", "reply-1", "reply-2"]
        (event,) = px.ledger.records(info.scope, "event", kinds=(REPLAY_EVENT,))
        assert event.body["stream"] is stream and event.body["route"] == protocol
        assert len(px.ledger.requests(info.scope)) == 3
        report = verify(px.ledger)
        assert report.ok, report.faults


@pytest.mark.parametrize(("protocol", "stream"), [("openai_chat", False), ("anthropic", True)])
def test_a_retry_after_recall_gets_the_reply_the_client_was_to_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str, stream: bool
) -> None:
    # The turn whose reply is lost ran a recall round inside the proxy first (whole, or
    # spliced into one stream): the retry gets the final reply, no round runs again.
    turns = 20
    script = [script_entry(k, tool=True) for k in range(turns)]
    recall = {"type": "tool_use", "id": "call_ev", "name": "EvidenceRead", "input": {"entry": 3}}
    script.append({"content": [recall], "usage": {"input_tokens": 10, "output_tokens": 2}})
    script.append(script_entry(turns, tool=False))
    _drop_after_record(monkeypatch, {turns + 1})
    with proxy(tmp_path, script, context_window=6_000) as px:
        talk = Talk(client_for(protocol, px.url), protocol, stream, "recall", result_lines=60)
        px.clients.append(talk.client)
        failures = 0
        while talk.turns <= turns:
            try:
                reply = talk.send()
            except BROKEN:
                failures += 1
                assert failures <= 3
                continue
            talk.accept(reply)
        assert failures >= 1 and reply.text == f"reply-{turns}" and not reply.calls
        px.fake.assert_complete()  # the retry called nothing upstream
        (info,) = px.ledger.sessions()
        receipts = px.ledger.records(info.scope, "receipt")
        assert [r.body["operation"] for r in receipts] == ["EvidenceRead"]
        stored = [said(e.message) for e in px.ledger.entries(info.scope) if e.role == "assistant"]
        assert stored.count(f"reply-{turns}") == 1
        assert len(px.ledger.records(info.scope, "event", kinds=(REPLAY_EVENT,))) == 1
        assert verify(px.ledger).ok


def test_a_retry_sent_while_the_first_attempt_runs_waits_for_its_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The client gave up on a slow reply and sent the request again while the proxy was still
    # on it: the second attempt waits for the session's turn and gets the reply the first
    # stored; upstream is asked once.
    original = Recorder.record
    holding, release = threading.Event(), threading.Event()

    def record(self: Recorder, *args: Any, **kwargs: Any) -> None:
        holding.set()
        assert release.wait(30)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Recorder, "record", record)
    route, routes, routed_twice = SessionRouter.route, [], threading.Event()

    def counted(self: SessionRouter, *args: Any) -> Any:
        routed = route(self, *args)
        routes.append(routed)
        if len(routes) == 2:
            routed_twice.set()
        return routed

    monkeypatch.setattr(SessionRouter, "route", counted)
    with proxy(tmp_path, [script_entry(0, tool=False)]) as px:
        talk = Talk(client_for("anthropic", px.url), "anthropic", False, "twice")
        px.clients.append(talk.client)
        got: dict[str, str] = {}
        first = threading.Thread(target=lambda: got.update(first=talk.send().text))
        first.start()
        assert holding.wait(30)
        second = threading.Thread(target=lambda: got.update(second=talk.send().text))
        second.start()
        # The second attempt is routed (as a continuation: the reply is not stored yet), then
        # waits behind the first.
        assert routed_twice.wait(30)
        assert routes[1].answered is None and routes[1].scope == routes[0].scope
        assert second.is_alive() and not got
        release.set()
        first.join(30)
        second.join(30)
        assert got == {"first": "reply-0", "second": "reply-0"}
        assert len(px.fake.requests) == 1
        (info,) = px.ledger.sessions()
        assert [e.role for e in px.ledger.entries(info.scope)] == ["user", "assistant"]
        assert len(px.ledger.records(info.scope, "event", kinds=(REPLAY_EVENT,))) == 1


def test_the_sdks_own_retry_is_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK retries a 500 by itself, with the same body: the client never sees the failure.
    script = [script_entry(k, tool=False) for k in range(2)]
    _drop_after_record(monkeypatch, {1})
    with proxy(tmp_path, script) as px:
        talk = Talk(px.anthropic(api_key="sk-test", max_retries=2), "anthropic", False, "sdk")
        for _ in range(2):
            talk.accept(talk.send())
        assert [m["content"][0]["text"] for m in talk.history if m["role"] == "assistant"] == [
            "reply-0",
            "reply-1",
        ]
        (info,) = px.ledger.sessions()
        assert [e.role for e in px.ledger.entries(info.scope)].count("assistant") == 2
        assert len(px.fake.requests) == 2


@pytest.mark.parametrize(
    ("protocol", "stream"),
    [("anthropic", True), ("openai_chat", True), ("openai_responses", False)],
)
def test_a_request_whose_reply_was_delivered_is_asked_anew(
    tmp_path: Path, protocol: str, stream: bool
) -> None:
    # The client had the reply (a client sampling one prompt twice): the same bytes again go
    # upstream, as a rewind of the session, as before.
    script = [script_entry(k, tool=False) for k in range(2)]
    with proxy(tmp_path, script) as px:
        talk = Talk(client_for(protocol, px.url), protocol, stream, "twice")
        px.clients.append(talk.client)
        assert [talk.send().text, talk.send().text] == ["reply-0", "reply-1"]
        assert len(px.fake.requests) == 2
        sessions = px.ledger.sessions()
        assert len(sessions) == 2 and sum(1 for s in sessions if s.parent is not None) == 1
        for info in sessions:
            assert px.ledger.records(info.scope, "event", kinds=(REPLAY_EVENT,)) == []


def test_a_changed_request_is_not_a_retry(tmp_path: Path) -> None:
    # The same history with another option is a new request: upstream answers it, and it is a
    # rewind (a child session), as before.
    script = [script_entry(k, tool=False) for k in range(2)]
    with proxy(tmp_path, script) as px:
        client = px.anthropic()
        history = [{"role": "user", "content": "hello"}]
        kw: dict[str, Any] = {"model": "claude-sonnet-4-5", "messages": history}
        first = client.messages.create(max_tokens=100, **kw)
        assert first.content[0].text == "reply-0"  # type: ignore[union-attr]
        again = client.messages.create(max_tokens=101, **kw)
        assert again.content[0].text == "reply-1"  # type: ignore[union-attr]
        assert len(px.fake.requests) == 2
        sessions = px.ledger.sessions()
        assert len(sessions) == 2 and {s.parent for s in sessions} == {None, sessions[0].id}
