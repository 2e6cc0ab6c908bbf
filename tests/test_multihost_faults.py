"""A small run of ``bench/multihost_faults.py`` on the test PostgreSQL: two agents in their own
process groups and ``comal serve --workers 2`` with two clients, on one ledger, while the agents
are killed with SIGKILL inside their session lock (and resume) and serve workers are killed
(and replaced). The database is not restarted: the test cluster is shared (the bench, given a
cluster of its own, does that too).

Afterwards the bench's own checks hold: ``verify`` clean; each agent session holds exactly its
script's steps in order; each shell call's effect happened once if receipted ``ok``, at most
once if ``uncertain``; summaries of one chunk made once; every conversation one session holding
exactly what its client holds, one request record per turn; no session lock left.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _pg_support import pg_dsn

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_agents_and_a_serve_worker_killed_on_one_postgres_ledger() -> None:
    # covers: SCL-1, LED-4, RES-2, DAG-8
    dsn = pg_dsn()  # skips, saying why, without COMAL_TEST_PG
    sys.path.insert(0, str(BENCH))
    try:
        from multihost_faults import Plan, run
    finally:
        sys.path.remove(str(BENCH))
    plan = Plan(
        url=dsn, cluster=None, agents=2, steps=16, workers=2, clients=2, turns=4,
        kills=8, restarts=0, seed=2026, timeout=240,
    )  # fmt: skip
    out = run(plan)
    assert out.faults == []
    # The kills were mounted: each agent kill is a worker that ended by SIGKILL (the bench
    # counts only those), each serve kill a worker of the supervisor, which replaced it.
    assert out.kills >= plan.kills
    assert out.agent_kills >= 1 and out.worker_kills >= plan.kills // 5
    assert out.pg_restarts == 0
    # Agents killed inside their lock left holders the next one cleared and recorded (RES-2).
    assert out.numbers["lock_cleared events"] >= 1
    assert out.numbers["agent entries"] == plan.agents * (2 * plan.steps + 2)
    assert out.numbers["summaries"] >= plan.agents  # compaction ran in every session (DAG-8)
    assert out.numbers["proxy requests recorded"] >= plan.clients * plan.turns
    assert out.numbers["verify faults"] == 0
