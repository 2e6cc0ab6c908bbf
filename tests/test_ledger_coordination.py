"""What the ledger offers surfaces that share it, on both backends: a statement tracer, writers
of a name taking turns inside a transaction, and one process per session (RES-2)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from _pg_support import LedgerStore
from comal.errors import UserError
from comal.ledger import LedgerBackend, SessionLocked
from comal.messages import Message


def test_trace_shows_every_statement_and_its_parameters(any_ledger: LedgerBackend) -> None:
    # covers: LED-4
    seen: list[tuple[str, Any]] = []
    also: list[str] = []
    with any_ledger.trace(lambda sql, params: seen.append((sql, params))):
        scope = any_ledger.create_session("t", "a")
        with any_ledger.trace(lambda sql, params: also.append(sql)):
            any_ledger.append(scope, [Message.user("traced words")])
    inserts = [params for sql, params in seen if sql.startswith("INSERT INTO entries (")]
    assert len(inserts) == 1 and any("traced words" in str(v) for v in inserts[0])
    assert also and set(also) <= {sql for sql, _ in seen}
    count = len(seen)
    any_ledger.entries(scope)
    assert len(seen) == count  # uninstalled on leaving the block


def test_writers_of_a_name_take_turns(ledger_store: LedgerStore) -> None:
    # covers: LED-4
    with ledger_store.open() as first, ledger_store.open() as second:
        with pytest.raises(UserError, match="inside atomic"):
            first.exclusive("family")
        order: list[str] = []
        holding = threading.Event()

        def hold() -> None:
            with first.atomic():
                first.exclusive("family")
                holding.set()
                time.sleep(0.3)
                order.append("first done")

        worker = threading.Thread(target=hold)
        worker.start()
        holding.wait(5)
        with second.atomic():
            second.exclusive("family")
            order.append("second in")
        worker.join()
    assert order == ["first done", "second in"]


def test_one_process_per_session(ledger_store: LedgerStore) -> None:
    # covers: RES-2
    with ledger_store.open() as first, ledger_store.open() as second:
        scope = first.create_session("t", "a")
        with first.session_lock(scope) as lock:
            assert lock.held and lock.stale is None
            with pytest.raises(SessionLocked) as err:
                second.session_lock(scope)
            assert err.value.code == "SESSION_LOCKED" and "in use by" in str(err.value)
        with second.session_lock(scope) as again:
            assert again.held


_HOLDER = """
import sys, time
from comal.ledger import PostgresLedger, Scope, open_ledger
backend, where, schema, session = sys.argv[1:5]
led = open_ledger(where) if backend == "sqlite" else PostgresLedger(where, schema=schema)
lock = led.session_lock(Scope("t", "a", session))
print("held", flush=True)
time.sleep(600)
"""


def test_who_holds_a_session_is_read_without_taking_it(ledger_store: LedgerStore) -> None:
    # covers: RES-2, SCL-1
    with ledger_store.open() as first, ledger_store.open() as second:
        scope = first.create_session("t", "a")
        assert second.session_lock_holder(scope) is None
        with first.session_lock(scope):
            holder = second.session_lock_holder(scope)
            assert holder is not None and holder["pid"] == os.getpid()
            # Reading took nothing: the lock is still the holder's alone.
            with pytest.raises(SessionLocked):
                second.session_lock(scope)
        assert second.session_lock_holder(scope) is None
        # A holder killed outright holds nothing, whatever its lock file or lease row says.
        where, schema = (
            (str(getattr(ledger_store, "path", "")), "")
            if ledger_store.backend == "sqlite"
            else (str(getattr(ledger_store, "dsn", "")), str(getattr(ledger_store, "schema", "")))
        )
        args = [ledger_store.backend, where, schema, scope.session]
        child = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, *args], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        held = second.session_lock_holder(scope)
        assert held is not None and held["pid"] == child.pid
        child.kill()
        child.wait()
        child.stdout.close()
        for _ in range(200):  # the database notices the closed connection a moment later
            if second.session_lock_holder(scope) is None:
                break
            time.sleep(0.05)
        assert second.session_lock_holder(scope) is None


def test_a_derived_value_is_the_same_wherever_the_secret_is(ledger_store: LedgerStore) -> None:
    # covers: LED-4
    with ledger_store.open() as first, ledger_store.open() as second:
        token = first.derived("web csrf v1", "acme\x00k1")
        assert token == second.derived("web csrf v1", "acme\x00k1") and len(token) == 64
        assert token != first.derived("web csrf v1", "acme\x00k2")
        assert token != first.derived("another purpose", "acme\x00k1")
