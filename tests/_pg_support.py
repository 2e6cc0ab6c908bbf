"""Ledger stores for tests: an SQLite file or a fresh PostgreSQL schema, opened the same way.

PostgreSQL comes from ``COMAL_TEST_PG`` (a URL; ``eval "$(.ci/run postgres)"`` starts a local
server and prints it). Without it PostgreSQL tests skip, except under ``CI=true`` where a missing
server is a failure. Each store gets its own schema, dropped afterwards, so tests never see each
other's rows. psycopg is imported only here, lazily, so SQLite-only runs do not need it.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import pytest

from comal.ledger import SQLiteLedger, open_ledger
from comal.tokens import TokenCounter

if TYPE_CHECKING:
    from comal.ledger import PostgresLedger

PG_ENV = "COMAL_TEST_PG"
BACKENDS = ("sqlite", "postgres")


def pg_dsn() -> str:
    dsn = os.environ.get(PG_ENV)
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{PG_ENV} is not set: CI must test PostgreSQL (.ci/run starts one)")
        pytest.skip(f'{PG_ENV} not set; run `eval "$(.ci/run postgres)"` to test PostgreSQL')
    return dsn


def pg_execute(dsn: str, schema: str | None, statement: str) -> None:
    """Raw SQL beside the ledger (tamper tests), committed."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        if schema is not None:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(statement)


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no other test uses; the ledger creates it, this drops it."""
    dsn = pg_dsn()
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        yield name
    finally:
        pg_execute(dsn, None, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def url_with_schema(dsn: str, schema: str) -> str:
    """The DSN with ``search_path`` set at connect time, for processes given only a URL."""
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}options={quote(f'-csearch_path={schema}')}"


class LedgerStore(Protocol):
    """Where a test's ledger lives, with the raw access tamper tests need."""

    backend: str

    def open(
        self, counter: TokenCounter | None = None, *, strict: bool = True
    ) -> SQLiteLedger | PostgresLedger: ...
    def execute(self, statement: str) -> None: ...
    def make_newer(self) -> None: ...


class SQLiteStore:
    backend = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self, counter: TokenCounter | None = None, *, strict: bool = True) -> SQLiteLedger:
        return open_ledger(self.path, counter=counter, strict=strict)

    def execute(self, statement: str) -> None:
        conn = sqlite3.connect(self.path)
        conn.execute(statement)
        conn.commit()
        conn.close()

    def make_newer(self) -> None:
        self.execute("PRAGMA user_version = 999")


class PostgresStore:
    backend = "postgres"

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema

    def open(self, counter: TokenCounter | None = None, *, strict: bool = True) -> PostgresLedger:
        from comal.ledger import PostgresLedger

        return PostgresLedger(self.dsn, counter=counter, schema=self.schema, strict=strict)

    def execute(self, statement: str) -> None:
        pg_execute(self.dsn, self.schema, statement)

    def make_newer(self) -> None:
        self.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_future', '')")


@contextmanager
def open_store(backend: str, tmp_path: Path) -> Iterator[LedgerStore]:
    if backend == "sqlite":
        yield SQLiteStore(tmp_path / "ledger.db")
        return
    with fresh_schema() as schema:
        yield PostgresStore(pg_dsn(), schema)
