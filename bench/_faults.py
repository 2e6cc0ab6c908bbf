"""What the PostgreSQL fault runs share (``pg_faults.py``, ``multihost_faults.py``): a schema of
the run's own on the cluster, the cluster's immediate restart, and the URL a child process is
given."""

from __future__ import annotations

import subprocess
import uuid
from urllib.parse import quote

__all__ = ["drop_schema", "new_schema", "restart_pg", "url_with_schema"]


def new_schema(url: str, prefix: str = "faults") -> str:
    """A fresh schema, migrated, for one run."""
    from comal.ledger import PostgresLedger

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    PostgresLedger(url, schema=schema).close()
    return schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def url_with_schema(url: str, schema: str) -> str:
    """The URL with ``search_path`` set at connect time, for processes given only a URL
    (``COMAL_LEDGER``)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


def restart_pg(cluster: str) -> None:
    """``pg_ctlcluster VERSION NAME restart -m immediate``: every connection is cut and the
    server recovers from its WAL, as after a crash."""
    version, name = cluster.split()
    subprocess.run(
        ["pg_ctlcluster", version, name, "restart", "-m", "immediate"], check=True, timeout=120
    )
