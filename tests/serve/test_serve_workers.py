"""``comal serve --workers 2``: two processes behind one socket, on one ledger (SCL-1).

Conversations run concurrently against the one address; the kernel hands each connection to
either worker, so turns of one conversation land on both. Routing is decided inside the write
transaction, so each conversation is one session with every message once, in order; a worker
killed with SIGKILL is replaced and the next requests are served.

# covers: LED-1, LED-4
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from comal.ledger import open_ledger
from comal.serve._workers import WORKER_HEADER
from comal.testing import FakeServer

from ._support import run_conversations, serve_process
from .test_proxy_shared_ledger import MODEL, _check, _script


@contextmanager
def _workers(
    target: str, fake: FakeServer, n: int
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with serve_process(target, fake, "--workers", str(n)) as (url, process):
        yield url, process
        process.terminate()  # the parent stops its workers
        assert process.wait(timeout=30) == 0
        # No worker outlives its parent: the process group is empty.
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)


def _conversation(url: str, name: str, turns: int, seen: set[str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{name}: question {turn}"})
        # A new connection per turn, as a load balancer in front would make.
        with httpx.Client(base_url=url, timeout=60) as client:
            reply = client.post(
                "/v1/messages",
                json={"model": MODEL, "max_tokens": 100, "messages": messages},
                headers={"x-api-key": "sk", "anthropic-version": "2023-06-01",
                         "x-comal-session": name},
            )  # fmt: skip
        assert reply.status_code == 200, reply.text
        seen.add(reply.headers[WORKER_HEADER])
        text = "".join(b["text"] for b in reply.json()["content"] if b["type"] == "text")
        messages.append({"role": "assistant", "content": text})
    return messages


def _run_all(
    url: str, conversations: int, turns: int, seen: set[str], prefix: str = "conv"
) -> dict[str, Any]:
    names = [f"{prefix}-{k}" for k in range(conversations)]
    return run_conversations(lambda name: _conversation(url, name, turns, seen), names, 180)


def _worker_pids(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(p) for p in children]


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "shared.db")
        return
    from _pg_support import fresh_schema, pg_dsn, url_with_schema

    dsn = pg_dsn()  # skips without COMAL_TEST_PG
    with fresh_schema() as schema:
        open_ledger(dsn, schema=schema).close()  # the URL names the schema; create it first
        yield url_with_schema(dsn, schema)


def test_two_workers_share_one_socket_and_one_ledger(target: str) -> None:
    # covers: SCL-1
    conversations, turns = 6, 6
    seen: set[str] = set()
    with FakeServer(_script(2 * conversations * turns)) as fake:
        with _workers(target, fake, 2) as (url, process):
            held = _run_all(url, conversations, turns, seen)
            assert seen == {"0", "1"}  # both workers took turns
            # A worker killed outright is replaced; the conversations go on.
            before = _worker_pids(process.pid)
            assert len(before) == 2
            os.kill(before[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while len(set(_worker_pids(process.pid)) - {before[0]}) < 2:
                assert time.monotonic() < deadline, "the worker was not replaced"
                time.sleep(0.1)
            more = _run_all(url, conversations, turns, seen, prefix="after")
    with open_ledger(target) as led:
        _check(led, held | more)
