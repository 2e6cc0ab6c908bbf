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

__all__ = [
    "DEFAULT_CONCURRENCY",
    "PathRow",
    "ProxyBench",
    "ProxyComparison",
    "find_litellm",
    "litellm_command",
    "litellm_config",
    "run_proxy_bench",
    "run_proxy_comparison",
]

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
        command = [sys.executable, "-c", "from comal.cli import main; main()", "serve"]
        command += ["--port", str(port)]
        command += ["--upstream-anthropic", fake.anthropic_base_url, "--no-dashboard"]
        if context_window is not None:
            command += ["--context-window", str(context_window)]
        if workers > 1:
            command += ["--workers", str(workers)]
        process = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        try:
            _wait_ready(url, process)
            progress(f"proxied: {clients} clients x {turns} turns")
            proxied, proxied_first, proxy_failures = asyncio.run(
                _load(url, clients, turns, stream, pad, per_client=pool_per_client)
            )
        finally:
            process.terminate()
            process.wait(timeout=30)
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


# -- comal serve beside LiteLLM, at several concurrencies ---------------------------------------

DEFAULT_CONCURRENCY = (1, 8, 32, 64)
_WARM = 10  # requests a server is sent, one after another, before anything is measured
# LiteLLM's proxy refuses to start without a master key; the clients send it as their API key
# (comal serve and FakeServer ignore it).
_LITELLM_KEY = "sk-comal-bench-0000000000000000000000000000000000000000"
_NOT_INSTALLED = (
    "LiteLLM is not installed: `make litellm` installs it into build/litellm (a venv of its "
    "own: litellm[proxy] pins rich<14, comal needs rich>=14.2), or pass --litellm PATH"
)


@dataclass(frozen=True)
class PathRow:
    """One path at one concurrency: latency, what it added over going straight to FakeServer
    at the same concurrency, and what arrived where. ``recorded``: request records the ledger
    holds for this row's requests (comal only); ``skipped``: why the row was not measured."""

    path: str
    concurrency: int
    workers: int = 1
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    added_p50_ms: float | None = None
    added_p99_ms: float | None = None
    requests_sent: int = 0
    reached_upstream: int = 0
    recorded: int | None = None
    failures: int = 0
    skipped: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProxyComparison:
    turns: int
    stream: bool
    concurrency: tuple[int, ...]
    rows: tuple[PathRow, ...]
    duplicated_entries: int
    wall_s: float
    litellm: str | None = None  # the LiteLLM command that ran (None: not installed)
    pool_per_client: bool = True  # each client's own connection pool (else one shared)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"] = [r.as_dict() for r in self.rows]
        return out


def litellm_config(api_base: str, *, model: str = MODEL, master_key: str = _LITELLM_KEY) -> str:
    """LiteLLM's config.yaml: ``model`` served as Anthropic's, at ``api_base`` (FakeServer),
    offline: no database, no callbacks, no telemetry. Written as YAML by hand (JSON strings are
    YAML strings), so the benchmark needs no YAML library."""
    q = json.dumps
    return "\n".join(
        [
            "model_list:",
            f"  - model_name: {q(model)}",
            "    litellm_params:",
            f"      model: {q('anthropic/' + model)}",
            f"      api_base: {q(api_base)}",
            "      api_key: x",
            "litellm_settings:",
            "  telemetry: false",
            "  callbacks: []",
            "  success_callback: []",
            "  failure_callback: []",
            "  set_verbose: false",
            "  json_logs: false",
            "general_settings:",
            f"  master_key: {q(master_key)}",
            "  disable_spend_logs: true",
            "  disable_reset_budget: true",
            "",
        ]
    )


def _litellm_env() -> dict[str, str]:
    """The environment LiteLLM runs in: its own venv's, offline (the model cost map it would
    fetch at start is the copy it ships; no telemetry; no database)."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "DATABASE_URL", "COMAL_LEDGER"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
        "DISABLE_SCHEMA_UPDATE": "True",
        "NO_DOCS": "True",
    }
    return env


def find_litellm(explicit: str | Path | None = None) -> tuple[Path | None, str | None]:
    """``(program, None)``: LiteLLM's ``litellm`` command or the python of a venv that has it;
    ``(None, why)`` when there is none. Looked for: ``explicit``, ``$COMAL_LITELLM``, then
    ``build/litellm`` (``make litellm``) here and at the checkout comal runs from."""
    if explicit is not None:
        given = Path(explicit)
        if given.is_dir():
            given = given / "bin" / "litellm"
        if not given.is_file():
            return None, f"--litellm {explicit}: no such program"
        return given.absolute(), None
    candidates = []
    if os.environ.get("COMAL_LITELLM"):
        candidates.append(Path(os.environ["COMAL_LITELLM"]))
    candidates.append(Path("build/litellm/bin/litellm"))
    candidates.append(Path(__file__).resolve().parents[3] / "build/litellm/bin/litellm")
    for candidate in candidates:
        if candidate.is_file():
            # Absolute, not resolved: a venv's python is a link its venv is found through.
            return candidate.absolute(), None
    return None, _NOT_INSTALLED


def litellm_command(program: Path, config: Path, port: int, workers: int = 1) -> list[str]:
    """The command line that starts LiteLLM's proxy on loopback (``program``: its ``litellm``
    command, or a python that can import it)."""
    if program.name.startswith("python"):
        head = [str(program), "-c", "from litellm.proxy.proxy_cli import run_server; run_server()"]
    else:
        head = [str(program)]
    return [
        *head,
        "--config",
        str(config),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        str(workers),
    ]


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


def run_proxy_comparison(
    *,
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY,
    turns: int = 20,
    stream: bool = False,
    workers: int | None = None,
    litellm: str | Path | None = None,
    litellm_workers: int = 1,
    pool_per_client: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> ProxyComparison:
    """One run against one FakeServer: at each concurrency (that many clients, ``turns``
    requests each), straight to FakeServer, through LiteLLM's proxy (when installed: else its
    rows say why), through ``comal serve`` with one worker, and with ``workers`` (default: one
    per core, at least two). Every path's requests are counted where they arrive; comal's in its
    ledger too (none lost, none recorded twice)."""
    from ..ledger import open_ledger
    from ..serve._run import free_port
    from ..testing import FakeServer

    started = time.perf_counter()
    many = workers if workers is not None else max(2, os.cpu_count() or 1)
    program, why = find_litellm(litellm)
    plan: list[tuple[str, int]] = [("direct", 1), ("litellm", litellm_workers), ("comal", 1)]
    if many > 1:
        plan.append(("comal", many))
    per_path = sum(concurrency) * turns + _WARM + sum(2 * min(c, 8) for c in concurrency)
    rows: list[PathRow] = []
    direct: dict[int, tuple[float, float]] = {}
    duplicated = 0
    usage = {"input_tokens": 50, "output_tokens": 5}
    with tempfile.TemporaryDirectory() as tmp, FakeServer(chunk=64) as fake:
        for k in range(per_path * len(plan)):
            fake.add({"content": f"reply {k}", "usage": usage})
        # Every server is started first, and at each concurrency the paths run one after the
        # other: a machine whose load drifts during the run shifts all of a level's rows alike.
        urls: dict[str, str] = {}
        processes: list[subprocess.Popen[bytes]] = []
        skipped: dict[str, str] = {}
        workers_of: dict[str, int] = {}
        try:
            for path, count in plan:
                label = path if path != "comal" or count == 1 else f"comal x{count}"
                workers_of[label] = count
                if path == "litellm" and program is None:
                    skipped[label] = why or _NOT_INSTALLED
                    continue
                if path == "direct":
                    urls[label] = fake.anthropic_base_url
                    continue
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                progress(f"{label}: starting")
                if path == "litellm":
                    assert program is not None
                    config = Path(tmp) / "litellm.yaml"
                    config.write_text(litellm_config(fake.anthropic_base_url))
                    process = subprocess.Popen(
                        litellm_command(program, config, port, count),
                        env=_litellm_env(),
                        cwd=tmp,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    ready: dict[str, Any] = {
                        "path": "/health/liveliness",
                        "name": "LiteLLM",
                        "within": 180.0,
                    }
                else:
                    env = {**os.environ, "COMAL_LEDGER": str(Path(tmp) / f"bench-{count}.db")}
                    process = subprocess.Popen(
                        _comal_command(port, fake.anthropic_base_url, count),
                        env=env,
                        stderr=subprocess.DEVNULL,
                    )
                    ready = {}
                processes.append(process)
                try:
                    _wait_ready(url, process, **ready)
                except RuntimeError as exc:
                    skipped[label] = str(exc)
                    continue
                urls[label] = url
            for url in urls.values():
                # Requests first, not measured: a server's first ones pay for what it sets up
                # lazily (connections, imports; LiteLLM goes on starting after it says ready).
                asyncio.run(_load(url, 1, _WARM, stream, 0, "-warm", _LITELLM_KEY))
            for c in concurrency:
                for label, count in workers_of.items():
                    if label in skipped:
                        rows.append(PathRow(label, c, count, skipped=skipped[label]))
                        continue
                    url = urls[label]
                    tag = _tag(PathRow(label, c))
                    asyncio.run(_load(url, min(c, 8), 2, stream, 0, f"{tag}w", _LITELLM_KEY))
                    before = len(fake.requests)
                    progress(f"{label}: {c} clients x {turns} turns")
                    latencies, _, failures = asyncio.run(
                        _load(url, c, turns, stream, 0, tag, _LITELLM_KEY, pool_per_client)
                    )
                    reached = len(fake.requests) - before
                    p50, p99 = _pct(latencies, 50), _pct(latencies, 99)
                    if label == "direct":
                        direct[c] = (p50, p99)
                    base = direct.get(c)
                    rows.append(
                        PathRow(
                            label,
                            c,
                            count,
                            p50,
                            p99,
                            None if base is None else round(p50 - base[0], 3),
                            None if base is None else round(p99 - base[1], 3),
                            c * turns,
                            reached,
                            None,
                            failures,
                        )
                    )
        finally:
            for process in processes:
                _stop(process)
        for label, count in workers_of.items():
            if not label.startswith("comal") or label in skipped:
                continue
            recorded, dup = _ledger_counts(open_ledger, Path(tmp) / f"bench-{count}.db")
            duplicated += dup
            rows = [
                PathRow(**{**r.as_dict(), "recorded": recorded.get(_tag(r), 0)})
                if r.path == label
                else r
                for r in rows
            ]
    return ProxyComparison(
        turns=turns,
        stream=stream,
        concurrency=tuple(concurrency),
        rows=tuple(rows),
        duplicated_entries=duplicated,
        wall_s=round(time.perf_counter() - started, 2),
        litellm=None if program is None else str(program),
        pool_per_client=pool_per_client,
    )


def _tag(row: PathRow) -> str:
    """What a row's clients put in their session names and messages (unique per row)."""
    return f"-{row.path.replace(' ', '')}-c{row.concurrency}"


def _ledger_counts(open_ledger: Callable[..., Any], path: Path) -> tuple[dict[str, int], int]:
    """Request records in the ledger at ``path`` by row tag (from the session's name), and the
    entries recorded twice in a session."""
    recorded: dict[str, int] = {}
    duplicated = 0
    with open_ledger(path) as led:
        for s in led.sessions():
            key = str(s.meta.get("client_key", ""))
            tag = key.removeprefix("header:bench").rpartition("-")[0]
            recorded[tag] = recorded.get(tag, 0) + len(led.requests(s.scope))
            digests = [(e.role, e.message.text) for e in led.entries(s.scope)]
            duplicated += len(digests) - len(set(digests))
    return recorded, duplicated
