"""Two ``comal serve`` processes on one ledger: routing is decided against the ledger inside the
write transaction, so neither appends the other's history again or branches wrongly.

The SQLite variant always runs: one proxy in this process and one ``comal serve`` subprocess
(or two in-process apps, each with its own ledger connection) on one ledger file. The same
checks run on PostgreSQL when ``COMAL_TEST_PG`` is set.

# covers: LED-1, LED-3
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anthropic

from comal.ledger import LedgerBackend, open_ledger, verify
from comal.serve import ServeConfig, create_app
from comal.serve._run import ServerThread
from comal.testing import FakeServer

from ._support import run_conversations, serve_process

MODEL = "claude-sonnet-4-5"


def _script(n: int) -> list[dict[str, Any]]:
    # Any reply fits any conversation: the replies are taken in arrival order.
    return [
        {"content": f"Reply {i}.", "usage": {"input_tokens": 5, "output_tokens": 2}}
        for i in range(n)
    ]


def _app_server(opener: Callable[[], LedgerBackend], fake: FakeServer, stack: ExitStack) -> str:
    led = opener()
    stack.callback(led.close)
    config = ServeConfig(
        upstream_anthropic=fake.anthropic_base_url, upstream_openai=fake.openai_base_url
    )
    server = stack.enter_context(ServerThread(create_app(config, ledger=led)))
    return server.url


@contextmanager
def _subprocess_server(target: str, fake: FakeServer) -> Iterator[str]:
    with serve_process(target, fake) as (url, _):
        yield url


def _conversation(urls: list[str], name: str, turns: int, seed: int) -> list[dict[str, Any]]:
    """One client conversation whose turns go to the proxies in a seeded random order (the
    first two to different proxies): its final history, as the client holds it."""
    chooser = random.Random(seed)
    order = [0, 1] + [chooser.randrange(len(urls)) for _ in range(turns - 2)]
    clients = [anthropic.Anthropic(base_url=u, api_key="sk", max_retries=0) for u in urls]
    messages: list[dict[str, Any]] = []
    try:
        for turn, which in enumerate(order):
            messages.append({"role": "user", "content": f"{name}: question {turn}"})
            reply = clients[which].messages.create(
                model=MODEL,
                max_tokens=100,
                messages=messages,  # type: ignore[arg-type]
                extra_headers={"x-comal-session": name},
            )
            text = "".join(b.text for b in reply.content if b.type == "text")
            messages.append({"role": "assistant", "content": text})
    finally:
        for client in clients:
            client.close()
    return messages


def _check(led: LedgerBackend, held: dict[str, list[dict[str, Any]]]) -> None:
    sessions = led.sessions()
    by_key = {s.meta["client_key"]: s for s in sessions}
    assert len(sessions) == len(held), sorted(by_key)
    for name, messages in held.items():
        info = by_key[f"header:{name}"]
        stored = [(e.role, e.message.text) for e in led.entries(info.scope)]
        assert stored == [(m["role"], m["content"]) for m in messages], name
        assert info.parent is None
        assert len(led.requests(info.scope)) == len(messages) // 2
    report = verify(led)
    assert report.ok, report


def _run_all(urls: list[str], conversations: int, turns: int) -> dict[str, list[dict[str, Any]]]:
    def talk(name: str) -> list[dict[str, Any]]:
        return _conversation(urls, name, turns, seed=int(name.split("-")[1]))

    return run_conversations(talk, [f"conv-{k}" for k in range(conversations)], 120)


def test_one_conversation_interleaved_across_two_processes(tmp_path: Path) -> None:
    target = str(tmp_path / "shared.db")
    open_ledger(target).close()
    turns = 8
    with FakeServer(_script(turns)) as fake, _subprocess_server(target, fake) as other:
        with ExitStack() as stack:
            here = _app_server(lambda: open_ledger(target), fake, stack)
            messages = _conversation([here, other], "one", turns, seed=7)
        fake.assert_complete()
    with open_ledger(target) as led:
        _check(led, {"one": messages})


def test_many_conversations_concurrently_on_two_apps(tmp_path: Path) -> None:
    target = str(tmp_path / "shared.db")
    open_ledger(target).close()
    conversations, turns = 8, 6
    with FakeServer(_script(conversations * turns)) as fake, ExitStack() as stack:
        urls = [_app_server(lambda: open_ledger(target), fake, stack) for _ in range(2)]
        held = _run_all(urls, conversations, turns)
        fake.assert_complete()
    with open_ledger(target) as led:
        _check(led, held)


def test_many_conversations_concurrently_on_postgres() -> None:
    from _pg_support import fresh_schema, pg_dsn
    from comal.ledger import PostgresLedger

    dsn = pg_dsn()  # skips without COMAL_TEST_PG
    conversations, turns = 6, 5
    with fresh_schema() as schema:

        def opener() -> LedgerBackend:
            return PostgresLedger(dsn, schema=schema)

        with FakeServer(_script(conversations * turns)) as fake, ExitStack() as stack:
            urls = [_app_server(opener, fake, stack) for _ in range(2)]
            held = _run_all(urls, conversations, turns)
            fake.assert_complete()
        led = opener()
        try:
            _check(led, held)
        finally:
            led.close()
