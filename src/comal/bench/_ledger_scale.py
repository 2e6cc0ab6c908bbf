"""``comal bench ledger``'s peers and scale-out rows: raw sqlite3 on the same bodies, concurrent
writer processes on SQLite and PostgreSQL side by side, and bytes on disk per MB of transcript.

Every number here is measured in the same run as the rows it is read against, on the same
machine: a ratio to a peer survives a busy machine better than an absolute rate does.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import ComalError, UserError
from ..ledger import describe_target, open_ledger
from ..ledger._target import parse_target
from ..messages import Message, message_to_json
from ..tokens import EstimatingCounter

__all__ = [
    "RawPeer",
    "SizeRow",
    "WriterRow",
    "raw_sqlite_peer",
    "run_size_bench",
    "run_writer_bench",
]


@dataclass(frozen=True)
class RawPeer:
    """sqlite3 alone, same machine, same run: the floor under comal's appends."""

    one_row_commits_per_s: float
    steps_per_s: float  # the bench's own steps' bodies, one transaction per step


def raw_sqlite_peer(steps: Sequence[Sequence[Message]], workdir: Path) -> RawPeer:
    """One-row commits of a tiny row, then the steps' canonical bodies in a table shaped like
    ``entries`` (its budget index), one transaction per step, WAL and ``synchronous=NORMAL``."""
    bodies = [[message_to_json(m) for m in s] for s in steps]
    conn = sqlite3.connect(workdir / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE tiny (id INTEGER PRIMARY KEY, v INTEGER)")
    conn.execute(
        "CREATE TABLE e (id INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, step INTEGER,"
        " role TEXT, tokens INTEGER, digest TEXT, seal TEXT, body TEXT, UNIQUE (session_id, seq))"
    )
    conn.execute("CREATE INDEX e_budget ON e (session_id, seq, tokens, step, role, id)")
    n = max(1000, len(steps))
    t0 = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO tiny (v) VALUES (?)", (i,))
        conn.execute("COMMIT")
    tiny = n / (time.perf_counter() - t0)
    seq = 0
    digest = "0" * 64
    t0 = time.perf_counter()
    for step in bodies:
        conn.execute("BEGIN IMMEDIATE")
        for k, body in enumerate(step):
            conn.execute(
                "INSERT INTO e (session_id, seq, step, role, tokens, digest, seal, body)"
                " VALUES ('s', ?, ?, 'tool', ?, ?, ?, ?)",
                (seq + k, seq, len(body) // 4, digest, digest, body),
            )
        seq += len(step)
        conn.execute("COMMIT")
    rate = len(bodies) / (time.perf_counter() - t0)
    conn.close()
    return RawPeer(tiny, rate)


# -- concurrent writers -----------------------------------------------------------------------
@dataclass(frozen=True)
class WriterRow:
    backend: str
    target: str
    writers: int
    steps: int
    steps_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _writer(
    target: str,
    schema: str | None,
    secret: str,
    index: int,
    n_steps: int,
    barrier: Any,
    results: Any,
) -> None:
    """One writer process: its own connection and session, ``n_steps`` timed appends."""
    from .. import bench

    try:
        steps = list(bench.synthetic_steps(1000 + index, n_steps * 3))[:n_steps]
        with open_ledger(target, schema=schema, secret=secret, counter=EstimatingCounter()) as led:
            scope = led.create_session("bench", f"writer-{index}")
            barrier.wait()
            times: list[float] = []
            for msgs in steps:
                t0 = time.perf_counter()
                led.append(scope, msgs)
                times.append(time.perf_counter() - t0)
            results.put((index, times, time.perf_counter(), None))
    except BaseException as exc:  # the parent reports it; a silent worker would hang it
        results.put((index, [], time.perf_counter(), f"{type(exc).__name__}: {exc}"))
        barrier.abort()


def _p(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * q))]


def _writers_once(
    target: str, schema: str | None, secret: str, writers: int, total_steps: int
) -> WriterRow:
    ctx = mp.get_context("spawn")  # the parent may hold threads (a progress spinner)
    barrier = ctx.Barrier(writers + 1)
    results = ctx.Queue()
    per = max(10, total_steps // writers)
    procs = [
        ctx.Process(target=_writer, args=(target, schema, secret, i, per, barrier, results))
        for i in range(writers)
    ]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=300)
    except Exception:
        pass  # a writer failed before starting: its report says why
    start = time.perf_counter()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    failed = [g[3] for g in got if g[3]]
    if failed:
        raise UserError(f"a benchmark writer failed: {failed[0]}")
    end = max(g[2] for g in got)
    ms = sorted(t * 1000 for g in got for t in g[1])
    kind = parse_target(target).kind
    return WriterRow(
        "postgresql" if kind == "postgres" else "sqlite",
        describe_target(target) + (f" (schema {schema})" if schema else ""),
        writers,
        len(ms),
        len(ms) / (end - start),
        statistics.median(ms),
        _p(ms, 0.99),
        ms[-1],
    )


def run_writer_bench(
    targets: Sequence[str],
    writers: Sequence[int],
    *,
    total_steps: int = 2000,
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[WriterRow]:
    """Steps/s and append latency with 1..N writer processes, each on its own session, on a
    fresh SQLite file and on a fresh schema of every PostgreSQL URL in ``targets`` (dropped
    afterwards); rounds interleave the backends so both see the same machine."""
    pg = [t for t in targets if parse_target(t).kind == "postgres"]
    if len(pg) != len(targets):
        raise UserError(
            "--ledger takes postgresql:// URLs here: the SQLite row always runs on a scratch "
            "file beside them (a benchmark never writes into a ledger you keep)"
        )
    secret = secrets.token_hex(32)
    rows: list[WriterRow] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        schemas = {url: f"comal_bench_{uuid.uuid4().hex[:12]}" for url in pg}
        try:
            for n in writers:
                db = os.path.join(tmp, f"writers-{n}.db")
                progress(f"{n} writer(s) on SQLite")
                rows.append(_writers_once(db, None, secret, n, total_steps))
                for url in pg:
                    progress(f"{n} writer(s) on PostgreSQL")
                    rows.append(_writers_once(url, schemas[url], secret, n, total_steps))
        finally:
            for url, schema in schemas.items():
                _drop_schema(url, schema)
    return rows


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    except psycopg.Error:
        pass  # a benchmark's scratch schema; the run's numbers stand


# -- bytes on disk per MB of transcript -------------------------------------------------------
@dataclass(frozen=True)
class SizeRow:
    backend: str
    bodies: str  # "text" (before) or "zstd" / "toast"
    transcript_mb: float
    entries: int
    ledger_bytes: int
    import_s: float

    @property
    def bytes_per_mb(self) -> float:
        return self.ledger_bytes / self.transcript_mb if self.transcript_mb else 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"bytes_per_mb": self.bytes_per_mb}


def _sqlite_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, size = (
            conn.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("page_count", "freelist_count", "page_size")
        )
    finally:
        conn.close()
    return int((pages - free) * size)


def _import_all(led: Any, files: Sequence[Path]) -> int:
    from ..importers import detect_format, load, store

    entries = 0
    for path in files:
        try:
            fmt = detect_format(path)
            imported = load(path, fmt)
            for st in store(led, imported):
                entries += st.entries
        except ComalError:
            continue  # what does not import is not counted in the MB either
    return entries


def run_size_bench(
    files: Sequence[Path],
    *,
    postgres: Sequence[str] = (),
    workdir: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> list[SizeRow]:
    """Import ``files`` into an SQLite ledger with bodies as text (comal before compression)
    and with zstd bodies, and into a fresh schema of each PostgreSQL URL; bytes on disk of each
    (SQLite: used pages after a checkpoint; PostgreSQL: the schema's relations with TOAST and
    indexes) per MB of transcript files."""
    mb = sum(p.stat().st_size for p in files) / 1e6
    if not files or mb == 0:
        raise UserError("no transcripts to import: give files or folders with --transcripts")
    counter = EstimatingCounter()
    rows: list[SizeRow] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        for compress in (False, True):
            progress(f"importing {mb:.1f} MB of transcripts ({'zstd' if compress else 'text'})")
            path = Path(tmp) / f"size-{compress}.db"
            from ..ledger import SQLiteLedger

            with SQLiteLedger(path, counter=counter, compress=compress) as led:
                t0 = time.perf_counter()
                n = _import_all(led, files)
                took = time.perf_counter() - t0
            label = "zstd" if compress else "text"
            rows.append(SizeRow("sqlite", label, mb, n, _sqlite_bytes(path), took))
    for url in postgres:
        schema = f"comal_bench_{uuid.uuid4().hex[:12]}"
        progress("importing into PostgreSQL")
        try:
            with open_ledger(url, schema=schema, counter=counter,
                             secret=secrets.token_hex(32)) as led:  # fmt: skip
                t0 = time.perf_counter()
                n = _import_all(led, files)
                took = time.perf_counter() - t0
                with led.atomic() as c:
                    size = c.execute(
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                        " JOIN pg_namespace s ON s.oid = c.relnamespace"
                        " WHERE s.nspname = ? AND c.relkind IN ('r', 'm')",
                        (schema,),
                    ).fetchone()[0]
            rows.append(SizeRow("postgresql", "toast", mb, n, int(size), took))
        finally:
            _drop_schema(url, schema)
    return rows
