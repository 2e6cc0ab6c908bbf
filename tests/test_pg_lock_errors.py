"""Taking a PostgreSQL session lock when the server is away, or the lock's table is missing,
fails with the ledger's coded error, never the driver's own (and never with the password).

Found by ``bench/multihost_faults.py``: an agent taking its session's lock while PostgreSQL
restarted got a bare ``psycopg.OperationalError`` from the lock.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from _pg_support import fresh_schema, pg_dsn
from comal.errors import ComalError
from comal.ledger import LedgerUnavailable
from comal.ledger._pg_lock import PgSessionLock
from comal.serve._run import free_port


def test_a_lock_on_a_server_that_is_away_is_ledger_unavailable() -> None:
    # covers: RES-2, SCL-1
    url = f"postgresql://comal:{quote('s3cret-pw')}@127.0.0.1:{free_port()}/nowhere"
    lock = PgSessionLock(url, "s1")
    with pytest.raises(LedgerUnavailable) as caught:  # nothing listens on that port
        lock.acquire()
    assert caught.value.code == "LEDGER_UNAVAILABLE"
    assert "s3cret-pw" not in str(caught.value)
    assert not lock.held


def test_a_lock_whose_table_is_missing_is_a_coded_error() -> None:
    # covers: RES-2
    dsn = pg_dsn()
    with fresh_schema() as schema:  # never created: no session_locks table in it
        lock = PgSessionLock(dsn, "s1", schema=schema)
        with pytest.raises(ComalError) as caught:
            lock.acquire()
        assert caught.value.code.startswith("LEDGER")
        assert "session lock" in str(caught.value)
        assert not lock.held
