"""The checks after ``multihost_faults.py``'s run, against the scripts and what the clients hold;
they read the ledger through a fresh connection and the agents' ``effects.log`` files."""

from __future__ import annotations

import collections
import itertools
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _multihost_agent import TENANT, answer

if TYPE_CHECKING:
    from comal.ledger import LedgerBackend, Scope

__all__ = ["Outcome", "Plan", "check"]


@dataclass
class Plan:
    url: str
    cluster: str | None = None
    agents: int = 8
    steps: int = 40
    workers: int = 2
    clients: int = 4
    turns: int = 10
    kills: int = 30
    restarts: int = 3
    seed: int = 24
    timeout: float = 270.0
    lease_ttl: float = 3.0  # the dag engine's compaction lease, seconds
    keep: bool = False


@dataclass
class Outcome:
    """What the run mounted and what the checks found; ``faults`` empty means clean."""

    agent_kills: int = 0
    worker_kills: int = 0  # SIGKILLs of serve processes: a worker, or the whole server
    server_kills: int = 0  # of the whole server (its process group), then started again
    serve_refused: int = 0  # server starts that ended (the database away), started again
    pg_restarts: int = 0
    agent_retries: int = 0
    client_retries: int = 0
    took: float = 0.0
    why: collections.Counter[str] = field(default_factory=collections.Counter)
    samples: dict[str, str] = field(default_factory=dict)  # one message of each kind of error
    numbers: dict[str, int] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return self.agent_kills + self.worker_kills


def _key(entry: Any) -> str:
    """What an entry is, in the script's terms: the prompt, a call, a result or the answer."""
    message = entry.message
    if message.tool_calls:
        return "call " + ",".join(c.id for c in message.tool_calls)
    if message.tool_result is not None:
        return "result " + str(message.tool_result.call_id)
    return f"{entry.role} {message.text}"


def _steps(led: LedgerBackend, scope: Scope, k: int, steps: int, out: Outcome) -> None:
    want = [f"user Agent {k}: run the steps."]
    for i in range(steps):
        want += [f"call a{k}c{i}", f"result a{k}c{i}"]
    want.append(f"assistant {answer(k)}")
    stored = [_key(e) for e in led.entries(scope)]
    counts = collections.Counter(stored)
    out.numbers["agent entries"] = out.numbers.get("agent entries", 0) + len(stored)
    lost = [w for w in want if w not in counts]
    twice = [s for s, n in counts.items() if n > 1]
    extra = [s for s in counts if s not in set(want)]
    if lost or twice or extra:
        out.faults.append(
            f"agent {k}: lost {lost[:3]}, twice {twice[:3]}, not scripted {extra[:3]}"
        )
    elif stored != want:
        out.faults.append(f"agent {k}: steps out of order")


def _effects(led: LedgerBackend, scope: Scope, k: int, ws: Path, out: Outcome) -> None:
    from comal.ops import receipts

    log = ws / "effects.log"
    ran = collections.Counter(log.read_text().split() if log.exists() else [])
    statuses: dict[str, list[str]] = collections.defaultdict(list)
    for r in receipts(led, scope):
        statuses[r.call_id].append(r.status)
    uncertain = 0
    for call_id, seen in statuses.items():
        times = ran[call_id.replace("c", ".c", 1)]
        if "uncertain" in seen:
            uncertain += 1
            # Blocked for good: never run again after the uncertain receipt.
            if times > 1 or seen[-1] != "uncertain":
                out.faults.append(f"agent {k}: uncertain {call_id} repeated ({seen}, ran {times})")
        elif seen[-1] == "ok" and times != 1:
            out.faults.append(f"agent {k}: {call_id} receipted ok, ran {times} times ({seen})")
    if any(n > 1 for n in ran.values()):
        out.faults.append(f"agent {k}: effects twice {[c for c, n in ran.items() if n > 1]}")
    out.numbers["uncertain calls (blocked, not run again)"] = (
        out.numbers.get("uncertain calls (blocked, not run again)", 0) + uncertain
    )
    out.numbers["effects"] = out.numbers.get("effects", 0) + sum(ran.values())


def _summaries(led: LedgerBackend, scope: Scope, k: int, out: Outcome) -> None:
    every = led.summaries(scope)
    if not every:
        out.faults.append(f"agent {k}: no summary made (compaction never ran)")
    by_depth: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    for s in every:
        by_depth[s.depth].append((s.first_seq, s.last_seq))
    for depth, spans in by_depth.items():
        spans.sort()
        if any(b[0] <= a[1] for a, b in itertools.pairwise(spans)):
            out.faults.append(f"agent {k}: depth {depth} chunks summarized twice: {spans}")
    out.numbers["summaries"] = out.numbers.get("summaries", 0) + len(every)


def _conversations(led: LedgerBackend, held: dict[str, list[dict[str, Any]]], out: Outcome) -> None:
    proxied = [s for s in led.sessions() if s.scope.tenant != TENANT]
    by_key = {s.meta.get("client_key"): s for s in proxied}
    if len(proxied) != len(held):
        out.faults.append(f"{len(proxied)} proxy sessions for {len(held)} conversations")
    requests = 0
    for name, messages in held.items():
        info = by_key.get(f"header:{name}")
        if info is None:
            out.faults.append(f"{name}: no session")
            continue
        stored = [(e.role, e.message.text) for e in led.entries(info.scope)]
        if stored != [(m["role"], m["content"]) for m in messages]:
            out.faults.append(f"{name}: the ledger holds {len(stored)} entries, not the client's")
        recorded = len(led.requests(info.scope))
        requests += recorded
        if info.parent is not None or recorded != len(messages) // 2:
            out.faults.append(f"{name}: {recorded} request records for {len(messages) // 2}")
    out.numbers["conversation turns the clients hold"] = sum(len(m) // 2 for m in held.values())
    out.numbers["proxy requests recorded"] = requests


def _cli_verify(target: str, out: Outcome) -> None:
    """``comal verify`` itself, as an operator runs it on the ledger afterwards."""
    argv = [sys.executable, "-c", "from comal.cli import main; main()", "verify", "--json"]
    done = subprocess.run(
        argv, env={**os.environ, "COMAL_LEDGER": target}, capture_output=True, timeout=300
    )
    out.numbers["comal verify exit status"] = done.returncode
    if done.returncode != 0:
        out.faults.append(f"comal verify: {done.returncode} {done.stdout[-300:]!r}")


def check(
    plan: Plan, schema: str, root: Path, held: dict[str, list[dict[str, Any]]], out: Outcome
) -> None:
    import psycopg
    from _faults import url_with_schema

    _cli_verify(url_with_schema(plan.url, schema), out)

    from comal.ledger import PostgresLedger, Scope, verify

    with PostgresLedger(plan.url, schema=schema) as led:
        report = verify(led)
        if not report.ok:
            out.faults += [f"verify: {f}" for f in report.faults[:5]]
        cleared = expired = 0
        out.numbers["agent entries the scripts make"] = plan.agents * (2 * plan.steps + 2)
        out.numbers["shell calls the scripts make"] = plan.agents * plan.steps
        for k in range(plan.agents):
            scope = Scope(TENANT, f"agent-{k}", f"agent-{k}")
            info = led.session(scope)
            if info is None or info.status != "finished":
                out.faults.append(f"agent {k}: not finished ({info and info.status})")
                continue
            _steps(led, scope, k, plan.steps, out)
            _effects(led, scope, k, root / f"ws{k}", out)
            _summaries(led, scope, k, out)
            kinds = [r.kind for r in led.records(scope, "event")]
            cleared += kinds.count("lock_cleared")
            expired += kinds.count("lease_expired")
        _conversations(led, held, out)
    with psycopg.connect(plan.url, autocommit=True) as conn:
        left = conn.execute(f'SELECT count(*) FROM "{schema}".session_locks').fetchone()
    out.numbers["lock_cleared events"] = cleared
    out.numbers["lease_expired events (compaction leases taken over)"] = expired
    out.numbers["session locks left"] = int(left[0]) if left else -1
    if left and left[0]:
        out.faults.append(f"{left[0]} session locks left after every agent finished")
    out.numbers["verify faults"] = len(report.faults)
