"""Issue 18: one tenant's expensive recall stalled every tenant behind ``comal serve``.

A ``ctx_search`` or ``session_search`` with 100 prefix terms over 2,000 entries ran 113 s, and
another tenant's one-message request waited 65 s for it: the recall ran inside the session
router's lock (one per process, taken by every request's routing) and on the ledger's one
connection (shared by every request). Now a recall call runs before its step is recorded, on a
connection of its own and outside the router's lock; its query is refused over the ledger's
limits before it runs and cut off by the database past its time bound.
"""

from __future__ import annotations

import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import pytest

from _pg_support import LedgerStore
from comal.ledger import LedgerBackend
from comal.serve import RECALL_EVENT, ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FakeServer

TURNS = 16  # enough history, in a 6,000-token window, for the engine to offer its recall tool
TOOLS = [{"name": "run", "description": "run a step", "input_schema": {"type": "object"}}]
USAGE = {"input_tokens": 10, "output_tokens": 2}


def _turns() -> list[dict[str, Any]]:
    out = []
    for turn in range(TURNS):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "run", "input": {"n": turn}}
        out.append({"content": [{"type": "text", "text": f"Step {turn}."}, call], "usage": USAGE})
    return out


def _recall(name: str, query: str, **more: str) -> dict[str, Any]:
    args = {"query": query, **more}
    block = {"type": "tool_use", "id": "toolu_recall", "name": name, "input": args}
    return {"content": [block], "usage": USAGE}


def _recall_script(engine: str) -> tuple[str, list[dict[str, Any]]]:
    """The engine's recall tool, and A's script: its turns, a recall, the answer, a last turn."""
    tool = "session_search" if engine == "pipeline" else "ctx_search"
    script = [*_turns(), _recall(tool, "marker-toolu_3"), {"content": "Hello A.", "usage": USAGE}]
    script.append({"content": "Done.", "usage": USAGE})
    return tool, script


@contextmanager
def _serve(led: LedgerBackend, script: list[dict[str, Any]], engine: str) -> Iterator[Any]:
    with FakeServer(script) as fake:
        config = ServeConfig(
            upstream_anthropic=fake.anthropic_base_url,
            upstream_openai=fake.openai_base_url,
            engine=engine,
            context_window=6_000,
        )
        with ServerThread(create_app(config, ledger=led)) as server:
            yield fake, server.url


class Conversation:
    """One tenant's client: the official SDK with its proxy key, whole replies, no retries."""

    def __init__(self, url: str, key: str, name: str) -> None:
        self.client = anthropic.Anthropic(
            base_url=url,
            api_key="sk",
            max_retries=0,
            timeout=30,
            default_headers={"x-comal-key": key, "x-comal-session": name},
        )
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": f"{name}: go"}]

    def turn(self) -> str:
        reply = self.client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1000, tools=TOOLS, messages=self.messages
        )
        content = [b.model_dump(exclude_none=True) for b in reply.content]
        self.messages.append({"role": "assistant", "content": content})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if calls:
            results = [
                {"type": "tool_result", "tool_use_id": c.id, "content": f"marker-{c.id}\n" * 40}
                for c in calls
            ]
            self.messages.append({"role": "user", "content": results})
        return "".join(b.text for b in reply.content if b.type == "text")

    def close(self) -> None:
        self.client.close()


@pytest.mark.parametrize("engine", ["pipeline", "dag"])
def test_a_tenants_request_is_answered_while_anothers_recall_runs(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # covers: SCL-2, DAG-7, PIP-1
    led = ledger_store.open()
    tool, script = _recall_script(engine)
    # B's search is held inside its statement, as a query over a large session would be, until
    # the test lets it go; whatever else needs the ledger meanwhile must not wait for it.
    dialect = type(led._dialect)  # type: ignore[attr-defined]
    original = dialect.ranked
    searching, release = threading.Event(), threading.Event()

    def held(self: Any, *args: Any) -> Any:
        searching.set()
        release.wait(60)
        return original(self, *args)

    monkeypatch.setattr(dialect, "ranked", held)
    _, key_a = led.add_proxy_key("tenant-a")
    _, key_b = led.add_proxy_key("tenant-b")
    try:
        with _serve(led, script, engine) as (fake, url):
            a, b = Conversation(url, key_a, "a"), Conversation(url, key_b, "b")
            for _ in range(TURNS):
                b.turn()
            answers: dict[str, str] = {}
            recalling = threading.Thread(target=lambda: answers.update(b=b.turn()))
            recalling.start()
            try:
                assert searching.wait(30), "B's recall never reached its search"
                answers["a"] = a.turn()  # one message, another tenant
                # A's answer came back while B's recall was still inside its search.
                assert not release.is_set() and recalling.is_alive()
            finally:
                release.set()
                recalling.join(60)
            assert answers == {"a": "Hello A.", "b": "Done."}
            fake.assert_complete()
            a.close()
            b.close()
        (sa,) = led.sessions(tenant="tenant-a")
        (sb,) = led.sessions(tenant="tenant-b")
        receipts = led.records(sb.scope, "receipt")
        assert [(r.body["operation"], r.body["status"]) for r in receipts] == [(tool, "ok")]
        (event,) = led.records(sb.scope, "event", kinds=(RECALL_EVENT,))
        # In the ledger too: A's reply was stored before B's recall step, which waited for
        # its search; nothing of it held A's turn.
        (reply_a,) = [e for e in led.entries(sa.scope) if e.role == "assistant"]
        assert reply_a.id < min(event.body["entries"])
    finally:
        led.close()


def _results(body: dict[str, Any]) -> list[str]:
    """The recall call's results in an upstream request."""
    return [
        str(block.get("content"))
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("tool_use_id") == "toolu_recall"
    ]


# Statements that do not end by themselves: only the database's time bound ends them.
_FOREVER = {
    "sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
    " SELECT count(*) FROM c",
    "postgres": "SELECT pg_sleep(600)",
}


@pytest.mark.parametrize("engine", ["pipeline", "dag"])
def test_a_recall_the_database_cuts_off_holds_no_other_tenant(
    ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    # covers: SCL-2, DAG-7, PIP-1, LED-5
    led = ledger_store.open()
    tool, script = _recall_script(engine)
    # B's search runs a statement that would never end, in the database: SQLite's progress
    # handler or PostgreSQL's statement_timeout must stop it at the recall's own bound
    # (SEARCH_SECONDS), and the model must be told so with a code. What happens meanwhile is
    # written down in order.
    dialect = type(led._dialect)  # type: ignore[attr-defined]
    order: list[str] = []
    searching = threading.Event()

    def runaway(self: Any, db: Any, *args: Any) -> Any:
        order.append("B search starts")
        searching.set()
        try:
            return db.execute(_FOREVER[ledger_store.backend]).fetchall()
        finally:
            order.append("B search ends")

    monkeypatch.setattr(dialect, "ranked", runaway)
    _, key_a = led.add_proxy_key("tenant-a")
    _, key_b = led.add_proxy_key("tenant-b")
    try:
        with _serve(led, script, engine) as (fake, url):
            a, b = Conversation(url, key_a, "a"), Conversation(url, key_b, "b")
            for _ in range(TURNS):
                b.turn()
            answers: dict[str, str] = {}
            recalling = threading.Thread(target=lambda: answers.update(b=b.turn()))
            recalling.start()
            assert searching.wait(30), "B's recall never reached its search"
            answers["a"] = a.turn()  # one message, another tenant
            order.append("A answered")
            recalling.join(60)
            assert answers == {"a": "Hello A.", "b": "Done."}
            # A was answered while B's statement was still running in the database.
            assert order == ["B search starts", "A answered", "B search ends"], order
            # The model got the coded error in its tool result, and nothing else broke.
            (result,) = _results(fake.requests[-1].body)
            assert result.startswith("[LEDGER_TIMEOUT] the search ran past its 5 s bound"), result
            fake.assert_complete()
            a.close()
            b.close()
        (sb,) = led.sessions(tenant="tenant-b")
        receipts = led.records(sb.scope, "receipt")
        assert [(r.body["operation"], r.body["status"]) for r in receipts] == [(tool, "timeout")]
        # The connections are whole: the next search on them runs as usual.
        monkeypatch.undo()
        assert led.search(sb.scope, "marker-toolu_3")
    finally:
        led.close()


_PREFIXES = " OR ".join(f"{c}*" for c in (string.ascii_lowercase * 4)[:100])
_WORDS = " ".join(f"w{i}" for i in range(150))


@pytest.mark.parametrize(
    ("engine", "recall", "said"),
    [
        ("pipeline", _recall("session_search", _PREFIXES), "[SEARCH_TOO_BROAD]"),
        ("dag", _recall("ctx_search", _PREFIXES, mode="fts"), "contract:arguments"),
        ("dag", _recall("ctx_search", _WORDS), "[SEARCH_TOO_BROAD]"),
    ],
)
def test_an_expensive_recall_query_is_refused_with_a_code(
    ledger_store: LedgerStore,
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    recall: dict[str, Any],
    said: str,
) -> None:
    # covers: SCL-2, DAG-7, PIP-1, LED-5
    led = ledger_store.open()
    script = [*_turns(), recall, {"content": "Done.", "usage": USAGE}]
    dialect = type(led._dialect)  # type: ignore[attr-defined]
    original = dialect.ranked
    ran: list[str] = []

    def counted(self: Any, db: Any, table: str, scope: Any, match: str, limit: int) -> Any:
        ran.append(match)
        return original(self, db, table, scope, match, limit)

    monkeypatch.setattr(dialect, "ranked", counted)
    try:
        with _serve(led, script, engine) as (fake, url):
            _, key = led.add_proxy_key("tenant-b")
            b = Conversation(url, key, "b")
            for _ in range(TURNS + 1):
                b.turn()
            b.close()
            # The model was told why, with the code, in the tool result it got next.
            results = _results(fake.requests[-1].body)
            assert len(results) == 1 and said in results[0], results
        # Refused before it ran: no full-text query reached the database.
        assert ran == []
    finally:
        led.close()
