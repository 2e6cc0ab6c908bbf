"""``comal bench proxy``: concurrent clients through ``comal serve`` against FakeServer.

One run measures both paths on loopback with the same load: ``clients`` concurrent
conversations of ``turns`` requests each, first straight to a :class:`FakeServer`, then through
``comal serve`` (a separate process, so the load generator does not share its interpreter)
in front of the same FakeServer. It reports the latency of each path (p50/p99), the proxy's
added latency, and what the ledger holds afterwards: one session per client, one request
record and two entries per turn — no request lost or recorded twice. Streamed runs also
report the time to the first byte of each reply (p50/p99, both paths). ``context_window`` (the
proxy's ``--context-window``) with ``pad`` words in each user message makes the engine stand in
for old history, so the proxy offers its recall tools and streams those turns through its
splicer; ``recall_offered`` counts the requests that did. ``workers`` runs ``comal serve
--workers N``: N processes behind the one socket, on the one ledger.

The proxy is a face above the benchmarks in comal's layering; it is imported here only when the
benchmark runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = ["MODEL", "ProxyBench", "run_proxy_bench"]

MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class ProxyBench:
    clients: int
    turns: int
    stream: bool
    direct_p50_ms: float
    direct_p99_ms: float
    proxy_p50_ms: float
    proxy_p99_ms: float
    added_p50_ms: float
    added_p99_ms: float
    requests_sent: int
    requests_recorded: int
    sessions: int
    entries: int
    duplicated_entries: int
    failures: int
    wall_s: float
    direct_ttfb_p50_ms: float = 0.0
    direct_ttfb_p99_ms: float = 0.0
    proxy_ttfb_p50_ms: float = 0.0
    proxy_ttfb_p99_ms: float = 0.0
    context_window: int | None = None
    recall_offered: int = 0
    workers: int = 1  # comal serve --workers: processes behind the one socket
    pool_per_client: bool = True  # each client's own connection pool (else one shared)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[k], 3)


async def _client(
    http: httpx.AsyncClient,
    url: str,
    n: int,
    turns: int,
    stream: bool,
    out: list[float],
    first: list[float],
    pad: int,
    tag: str = "",
    api_key: str = "bench",
) -> int:
    messages: list[dict[str, Any]] = []
    failures = 0
    filler = " ".join(f"word{i}" for i in range(pad))
    for turn in range(turns):
        say = f"client {tag}{n} turn {turn}: say something {filler}".rstrip()
        messages.append({"role": "user", "content": say})
        body = {"model": MODEL, "max_tokens": 256, "messages": messages}
        if stream:
            body["stream"] = True
        headers = {"x-api-key": api_key, "x-comal-session": f"bench{tag}-{n}"}
        started = time.perf_counter()
        request = http.build_request("POST", f"{url}/v1/messages", json=body, headers=headers)
        chunks: list[bytes] = []
        try:
            response = await http.send(request, stream=True)
            async for chunk in response.aiter_bytes():
                if not chunks:
                    first.append((time.perf_counter() - started) * 1000)
                chunks.append(chunk)
            await response.aclose()
        except httpx.HTTPError:
            # A connection the server dropped (or never took): counted, and the turn asked
            # again as the next one.
            failures += 1
            messages.pop()
            continue
        raw = b"".join(chunks)
        out.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            failures += 1
            messages.pop()
            continue
        if stream:
            if b"message_stop" not in raw:
                failures += 1
            text = "".join(
                json.loads(line[6:])["delta"].get("text", "")
                for line in raw.decode().splitlines()
                if line.startswith("data: ") and '"content_block_delta"' in line
            )
        else:
            text = "".join(b.get("text", "") for b in json.loads(raw)["content"])
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
    return failures


async def _load(
    url: str,
    clients: int,
    turns: int,
    stream: bool,
    pad: int,
    tag: str = "",
    api_key: str = "bench",
    per_client: bool = False,
) -> tuple[list[float], list[float], int]:
    """``per_client``: each client has a connection pool of its own, as each real agent has
    its own HTTP client; else all share one (at 64 clients its queueing, in this process,
    holds some requests back for seconds before they are sent to a keep-alive server)."""
    latencies: list[float] = []
    first: list[float] = []

    def pool(size: int) -> httpx.AsyncClient:
        # Idle connections are dropped before the servers' keep-alive (5 s) would: a request
        # sent on one the server is closing fails.
        limits = httpx.Limits(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=2.0
        )
        return httpx.AsyncClient(timeout=120, limits=limits)

    # Every pool is made before any request is timed: making one (its TLS context) takes the
    # event loop for tens of milliseconds, which other clients' requests would wait out.
    pools = [pool(2) for _ in range(clients)] if per_client else [pool(clients * 2)]
    try:
        failures = await asyncio.gather(
            *(
                _client(pools[n % len(pools)], url, n, turns, stream, latencies, first, pad, tag,
                        api_key)
                for n in range(clients)
            )
        )  # fmt: skip
    finally:
        for http in pools:
            await http.aclose()
    return latencies, first, sum(failures)


def _wait_ready(
    url: str,
    process: subprocess.Popen[bytes],
    *,
    path: str = "/api/sessions",
    name: str = "comal serve",
    within: float = 60.0,
) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not come up within {within:g} s")


def run_proxy_bench(
    *,
    clients: int = 32,
    turns: int = 20,
    stream: bool = False,
    context_window: int | None = None,
    pad: int = 0,
    workers: int = 1,
    pool_per_client: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> ProxyBench:
    from ..ledger import open_ledger
    from ..serve._run import free_port
    from ..testing import FakeServer

    # Every reply's text is unique, so a reply recorded twice shows as a duplicated entry.
    total = clients * turns
    usage = {"input_tokens": 50, "output_tokens": 5}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, FakeServer(chunk=64) as fake:
        for k in range(2 * total):  # the direct run, then the proxied run
            fake.add({"content": f"reply {k}", "usage": usage})
        progress(f"direct: {clients} clients x {turns} turns")
        direct, direct_first, direct_failures = asyncio.run(
            _load(fake.anthropic_base_url, clients, turns, stream, pad, per_client=pool_per_client)
        )
        ledger_path = Path(tmp) / "bench.db"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "COMAL_LEDGER": str(ledger_path)}
        command = _comal_command(port, fake.anthropic_base_url, workers)
        if context_window is not None:
            command += ["--context-window", str(context_window)]
        process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        try:
            _wait_ready(url, process)
            progress(f"proxied: {clients} clients x {turns} turns")
            proxied, proxied_first, proxy_failures = asyncio.run(
                _load(url, clients, turns, stream, pad, per_client=pool_per_client)
            )
        finally:
            _stop(process)
        with open_ledger(ledger_path) as led:
            sessions = led.sessions()
            records = [r for s in sessions for r in led.requests(s.scope)]
            recorded = len(records)
            offered = sum(1 for r in records if r.meta.get("recall_offered"))
            entries = 0
            duplicated = 0
            for s in sessions:
                digests = [(e.role, e.message.text) for e in led.entries(s.scope)]
                entries += len(digests)
                duplicated += len(digests) - len(set(digests))
    return ProxyBench(
        clients=clients,
        turns=turns,
        stream=stream,
        direct_p50_ms=_pct(direct, 50),
        direct_p99_ms=_pct(direct, 99),
        proxy_p50_ms=_pct(proxied, 50),
        proxy_p99_ms=_pct(proxied, 99),
        added_p50_ms=round(_pct(proxied, 50) - _pct(direct, 50), 3),
        added_p99_ms=round(_pct(proxied, 99) - _pct(direct, 99), 3),
        requests_sent=total,
        requests_recorded=recorded,
        sessions=len(sessions),
        entries=entries,
        duplicated_entries=duplicated,
        failures=direct_failures + proxy_failures,
        wall_s=round(time.perf_counter() - started, 2),
        direct_ttfb_p50_ms=_pct(direct_first, 50),
        direct_ttfb_p99_ms=_pct(direct_first, 99),
        proxy_ttfb_p50_ms=_pct(proxied_first, 50),
        proxy_ttfb_p99_ms=_pct(proxied_first, 99),
        context_window=context_window,
        recall_offered=offered,
        workers=workers,
        pool_per_client=pool_per_client,
    )


def _comal_command(port: int, upstream: str, workers: int) -> list[str]:
    command = [sys.executable, "-c", "from comal.cli import main; main()", "serve"]
    command += ["--port", str(port), "--upstream-anthropic", upstream, "--no-dashboard"]
    if workers > 1:
        command += ["--workers", str(workers)]
    return command


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)
