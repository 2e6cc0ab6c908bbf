"""A PostgreSQL ledger whose connection the server cut (a restart, an operator's
``pg_terminate_backend``) goes on with a new one once the server is back.

Found by ``bench/multihost_faults.py``: after a PostgreSQL restart a ``comal serve`` worker's
one connection stayed broken, and the worker failed every later request with
LEDGER_UNAVAILABLE until it was itself restarted.
"""

from __future__ import annotations

import pytest

from _pg_support import fresh_schema, pg_dsn, pg_execute
from comal.ledger import LedgerUnavailable, PostgresLedger, verify
from comal.messages import Message


def _cut(led: PostgresLedger, dsn: str) -> int:
    """End the ledger's connection from the server's side; its server pid."""
    with led._reading() as db:
        pid = int(db.execute("SELECT pg_backend_pid()").fetchone()[0])
    pg_execute(dsn, None, f"SELECT pg_terminate_backend({pid})")
    return pid


def test_the_ledger_opens_a_new_connection_after_the_server_cut_its_own() -> None:
    # covers: LED-4, SCL-1
    dsn = pg_dsn()
    with fresh_schema() as schema, PostgresLedger(dsn, schema=schema) as led:
        scope = led.create_session("t", "a")
        led.append(scope, [Message.user("before")])
        before = _cut(led, dsn)
        with pytest.raises(LedgerUnavailable):  # the write that finds it out fails whole
            led.append(scope, [Message.user("lost")])
        led.append(scope, [Message.user("after")])  # a new connection, in the ledger's schema
        assert [e.message.text for e in led.entries(scope)] == ["before", "after"]
        with led._reading() as db:
            assert db.execute("SELECT pg_backend_pid()").fetchone()[0] != before
            assert db.execute("SELECT current_schema()").fetchone()[0] == schema
        assert verify(led).ok


def test_a_ledger_closed_on_purpose_stays_closed() -> None:
    # covers: LED-4
    dsn = pg_dsn()
    with fresh_schema() as schema:
        led = PostgresLedger(dsn, schema=schema)
        scope = led.create_session("t", "a")
        led.close()
        with pytest.raises(LedgerUnavailable):  # not quietly reconnected
            led.append(scope, [Message.user("after close")])
