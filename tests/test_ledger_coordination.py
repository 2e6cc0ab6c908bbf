"""What the ledger offers surfaces that share it, on both backends: a statement tracer, writers
of a name taking turns inside a transaction, and one process per session (RES-2)."""

from __future__ import annotations

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
