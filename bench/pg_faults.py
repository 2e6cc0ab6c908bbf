"""A bounded fault run on one PostgreSQL ledger (SCL-1, RES-2): writer processes, each in its own
process group, append scripted steps to their own sessions under the session lock, while this
driver kills random writers with SIGKILL (and starts them again) and restarts PostgreSQL in
immediate mode mid-run. A writer that starts, or loses its connection, reopens the ledger, takes
the session's lock (recording the dead holder it clears) and goes on from the step the ledger
says is next: a commit whose outcome it never saw is read back, never written again.

Afterwards: `verify` is clean, every session holds exactly its script's steps in order (none
lost, none twice), and the locks cleared were recorded. It prints numbers; it is not a test.

It restarts the cluster it is given, so give it one of its own, e.g.:

    pg_createcluster 15 faults --port 5442 && pg_ctlcluster 15 faults start
    runuser -u postgres -- psql -p 5442 -c "CREATE ROLE comal LOGIN PASSWORD 'comal'" \\
        -c "CREATE DATABASE comal_faults OWNER comal"
    COMAL_LEDGER_SECRET=$(openssl rand -hex 32) .venv/bin/python bench/pg_faults.py \\
        --url postgresql://comal:comal@127.0.0.1:5442/comal_faults --cluster "15 faults"
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time

from _faults import drop_schema, new_schema, restart_pg


def _step(k: int, i: int) -> list[object]:
    from comal.messages import Message, ToolCall

    call = ToolCall(f"c{k}-{i}", "Bash", f'{{"command": "step {k}.{i}"}}')
    return [Message.assistant(f"writer {k} step {i}", call), Message.tool(call.id, f"out {k}.{i}")]


def writer(url: str, schema: str, k: int, steps: int) -> None:
    """One writer's whole life: reopen, relock and resume until its script is stored."""
    from comal.agent import lock_session
    from comal.errors import ComalError
    from comal.ledger import PostgresLedger, Scope

    scope = Scope("faults", f"writer-{k}", f"{schema}-w{k}")
    while True:
        try:
            with PostgresLedger(url, schema=schema) as led:
                if led.session(scope) is None:
                    led.create_session(scope.tenant, scope.agent, session_id=scope.session)
                with lock_session(led, scope):
                    info = led.session(scope)
                    assert info is not None
                    for i in range(info.entries // 2, steps):  # whole steps only: 2 entries each
                        led.append(scope, _step(k, i))  # type: ignore[arg-type]
            return
        except (ComalError, OSError, AssertionError):
            time.sleep(0.2)  # the database is restarting, or a dead holder's lock lingers


def _spawn(args: argparse.Namespace, schema: str, k: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--url", args.url, "--schema", schema, "--writer", str(k)]
    cmd += ["--steps", str(args.steps)]
    return subprocess.Popen(cmd, start_new_session=True, stderr=subprocess.DEVNULL)


def drive(args: argparse.Namespace) -> int:
    from comal.ledger import PostgresLedger, Scope, verify

    schema = new_schema(args.url)
    rng = random.Random(args.seed)
    procs = {k: _spawn(args, schema, k) for k in range(args.writers)}
    kills = restarts = 0
    started = time.monotonic()
    restart_at = sorted(rng.uniform(2, 2 + args.restarts * 4) for _ in range(args.restarts))
    while any(p.poll() is None for p in procs.values()):
        time.sleep(rng.uniform(0.05, 0.3))
        if restart_at and time.monotonic() - started > restart_at[0]:
            restart_at.pop(0)
            restart_pg(args.cluster)
            restarts += 1
            continue
        running = [k for k, p in procs.items() if p.poll() is None]
        if running and (kills < args.kills or rng.random() < 0.3):
            k = rng.choice(running)
            os.killpg(procs[k].pid, signal.SIGKILL)
            procs[k].wait()
            kills += 1
            procs[k] = _spawn(args, schema, k)
    took = time.monotonic() - started
    failed = [k for k, p in procs.items() if p.returncode != 0]
    with PostgresLedger(args.url, schema=schema) as led:
        report = verify(led)
        lost = twice = disordered = cleared = 0
        for k in range(args.writers):
            scope = Scope("faults", f"writer-{k}", f"{schema}-w{k}")
            stored = [(e.role, e.message.text) for e in led.entries(scope)]
            want = [(m.role.value, m.text) for i in range(args.steps) for m in _step(k, i)]  # type: ignore[attr-defined]
            twice += max(0, len(stored) - len(set(stored)))
            lost += len(set(want) - set(stored))
            disordered += int(sorted(stored) == sorted(want) and stored != want)
            cleared += sum(1 for r in led.records(scope, "event") if r.kind == "lock_cleared")
        total = sum(len(led.entries(Scope("faults", f"writer-{k}", f"{schema}-w{k}")))
                    for k in range(args.writers))  # fmt: skip
    if not args.keep:
        drop_schema(args.url, schema)
    print(f"writers {args.writers} x {args.steps} steps, {took:.1f} s")
    print(f"SIGKILLs {kills}, PostgreSQL restarts (immediate) {restarts}")
    expected = args.writers * args.steps * 2
    print(f"entries {total} (expected {expected}), lost {lost}, twice {twice}, "
          f"sessions out of order {disordered}")  # fmt: skip
    print(f"lock_cleared events recorded {cleared}; writers that failed {failed}")
    print(f"verify: {'ok' if report.ok else report.faults[:5]}")
    return 0 if report.ok and not (lost or twice or disordered or failed) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--cluster", help='"VERSION NAME" of the cluster to restart')
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--keep", action="store_true", help="keep the run's schema")
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--writer", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer is not None:
        writer(args.url, args.schema, args.writer, args.steps)
        return 0
    if not args.cluster:
        parser.error("--cluster names the cluster the run restarts (one of its own)")
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
