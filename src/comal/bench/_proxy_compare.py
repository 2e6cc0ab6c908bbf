"""``comal bench proxy --compare``: comal serve beside LiteLLM's proxy, at several concurrencies.

Against one FakeServer, at each concurrency: straight to it, through LiteLLM's proxy (a
subprocess from ``build/litellm``; its rows say why when it is missing), and through ``comal
serve`` with one worker and with more. The load is :mod:`._proxy`'s.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ._proxy import MODEL, _comal_command, _load, _pct, _stop, _wait_ready

__all__ = [
    "DEFAULT_CONCURRENCY",
    "PathRow",
    "ProxyComparison",
    "find_litellm",
    "litellm_command",
    "litellm_config",
    "run_proxy_comparison",
]


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
