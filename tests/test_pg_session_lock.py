"""PostgreSQL session locks across processes and hosts (RES-2, SCL-1): a holder killed with
SIGKILL, and a holder frozen with SIGSTOP (a host that stopped answering while its connection
stays open), each have their lock cleared and recorded; a live holder's heartbeat keeps it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from _pg_support import PostgresStore, fresh_schema, pg_dsn
from comal.agent import lock_session
from comal.ledger import PostgresLedger, Scope, SessionLocked

_HOLDER = """
import sys, time
from comal.ledger import PostgresLedger, Scope
url, schema, session, ttl = sys.argv[1:5]
led = PostgresLedger(url, schema=schema)
lock = led.session_lock(Scope("t", "a", session), ttl=float(ttl))
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with fresh_schema() as schema:
        yield PostgresStore(pg_dsn(), schema)


def _hold(store: PostgresStore, scope: Scope, ttl: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, store.dsn, store.schema, scope.session, str(ttl)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def _end(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    if child.stdout is not None:
        child.stdout.close()


def _cleared(led: PostgresLedger, scope: Scope) -> list[dict[str, object]]:
    return [r.body for r in led.records(scope, "event") if r.kind == "lock_cleared"]


def test_a_killed_holders_lock_is_cleared_and_recorded(store: PostgresStore) -> None:
    # covers: RES-2
    with store.open() as led:
        scope = led.create_session("t", "a")
        child = _hold(store, scope, 30)
        try:
            with pytest.raises(SessionLocked, match=f"pid {child.pid}"):
                lock_session(led, scope)
        finally:
            _end(child)
        # The server notices the closed socket at once; give it a moment on a busy machine.
        for _ in range(50):
            try:
                lock = lock_session(led, scope)
                break
            except SessionLocked:
                time.sleep(0.1)
        with lock:
            (event,) = _cleared(led, scope)
            previous = event["previous"]
            assert isinstance(previous, dict) and previous["pid"] == child.pid
            assert "connection ended" in str(event["reason"])
        with lock_session(led, scope) as again:  # released cleanly: nothing more to record
            assert again.stale is None
        assert len(_cleared(led, scope)) == 1


def test_a_frozen_holders_lease_expires_and_its_connection_is_ended(
    store: PostgresStore,
) -> None:
    # covers: RES-2
    with store.open() as led:
        scope = led.create_session("t", "a")
        child = _hold(store, scope, 1.5)
        try:
            os.kill(child.pid, signal.SIGSTOP)  # alive, connected, and beating no more
            with pytest.raises(SessionLocked):
                lock_session(led, scope)
            deadline = time.monotonic() + 30
            while True:
                try:
                    lock = lock_session(led, scope)
                    break
                except SessionLocked:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            with lock:
                (event,) = _cleared(led, scope)
                assert "heartbeat stopped" in str(event["reason"])
                assert isinstance(event["previous"], dict)
                assert event["previous"]["pid"] == child.pid
        finally:
            _end(child)


def test_a_live_holders_heartbeat_keeps_its_lease(store: PostgresStore) -> None:
    # covers: RES-2
    with store.open() as first, store.open() as second:
        scope = first.create_session("t", "a")
        with first.session_lock(scope, ttl=0.6) as lock:
            time.sleep(1.5)  # well past one TTL: only the heartbeat keeps the row fresh
            with pytest.raises(SessionLocked, match="lease runs"):
                second.session_lock(scope)
            assert not lock.lost
        with second.session_lock(scope) as again:
            assert again.stale is None
