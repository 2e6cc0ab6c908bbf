"""Per-turn ledger cost at turn 100 and turn 5,000 of a session, beside 40,000 imported requests.

    .venv/bin/python bench/ledger_turn.py [--pg URL] [--imported 40000] [--turns 5000]

Times (median of repeated calls, milliseconds) each query the agent makes every turn, in the way
it made them before (``agent/_spend.py`` reading every request of the tenant, ``_propose.py``
reading the whole request log, a ``max(step)`` scan for a joined result, ``receipt_mark``
decoding every receipt) and through the indexed queries that replace them. Prints a table and the
turn-5,000 / turn-100 ratio of the new per-turn total. Nothing is asserted: numbers are printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from comal.agent._result import receipt_mark as old_receipt_mark
from comal.agent._spend import spent as old_spent
from comal.ledger import LedgerBackend, Scope, StepInput, UsageInput, open_ledger
from comal.messages import Message, ToolCall
from comal.tokens import EstimatingCounter, Usage

TENANT = "acme"
RUN = "run-1"


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm: caches and the statement cache
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _import(led: LedgerBackend, requests: int) -> None:
    per = 1000
    for s in range(max(1, requests // per)):
        scope = led.create_session(TENANT, "claude-code", status="finished")
        steps = [
            StepInput(
                [Message.assistant(f"imported step {i} of session {s}")],
                (UsageInput(Usage(1200, 800, 40, 300, None), "m", "anthropic", {"raw": {}}),),
            )
            for i in range(per)
        ]
        led.append_steps(scope, steps)


def _turn(led: LedgerBackend, scope: Scope, i: int, now: datetime) -> None:
    call = ToolCall(f"c{i}", "Bash", '{"command": "ls"}')
    meta = {
        "run": RUN,
        "at": (now - timedelta(seconds=5000 - i)).isoformat(),
        "prompt_last_seq": 2 * i,
    }
    usage = UsageInput(Usage(900, 20_000, 100, 200, None), "m", "anthropic", meta)
    step = led.append(scope, [Message.assistant(f"turn {i}", call)], usage=usage)
    led.append(scope, [Message.tool(call.id, "file.txt\n" * 5)], join_step=step[0].step)
    led.add_record(scope, "receipt", "Bash", {"status": "ok", "call": call.id})
    led.add_record(scope, "event", "output", {"content": "file.txt\n" * 5})


def _old_anchor(led: LedgerBackend, scope: Scope) -> Any:
    return next(
        (
            r
            for r in reversed(led.requests(scope))
            if r.entry_id is not None
            and r.new_input is not None
            and isinstance(r.meta.get("prompt_last_seq"), int)
        ),
        None,
    )


def _old_join_scan(led: LedgerBackend, scope: Scope) -> Any:
    with led.atomic() as c:
        return c.execute(
            led._dialect.q("SELECT max(step) FROM entries WHERE session_id = ?"),  # type: ignore[attr-defined]
            (scope.session,),
        ).fetchone()


def measure(led: LedgerBackend, scope: Scope, now: datetime, repeat: int) -> dict[str, float]:
    hour, day = now - timedelta(hours=1), now - timedelta(days=1)
    mark = led.record_mark(scope)
    old = {
        "spend guard (3 tiers)": lambda: old_spent(led, TENANT, RUN, now=now),
        "estimate anchor": lambda: _old_anchor(led, scope),
        "join: latest step": lambda: _old_join_scan(led, scope),
        "receipt mark": lambda: old_receipt_mark(led, scope),
    }
    new = {
        "spend guard (3 tiers)": lambda: (
            led.spend(TENANT, run=RUN),
            led.spend(TENANT, since=hour),
            led.spend(TENANT, since=day),
        ),
        "estimate anchor": lambda: led.last_request(scope),
        "join: latest step": lambda: led._session_row(scope),  # type: ignore[attr-defined]
        "receipt mark": lambda: led.record_mark(scope),
        "receipts since mark": lambda: led.records(scope, "receipt", since_id=mark),
        "events by kind, newest 20": lambda: led.records(
            scope, "event", kinds=["output"], since_id=max(0, mark - 40), limit=20
        ),
    }
    out = {f"before: {k}": _median_ms(f, max(3, repeat // 10)) for k, f in old.items()}
    out |= {f"after: {k}": _median_ms(f, repeat) for k, f in new.items()}
    return out


def run(target: str | None, imported: int, turns: int, repeat: int) -> None:
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        where = target or str(Path(tmp) / "turn.db")
        kwargs: dict[str, Any] = {"schema": f"bench_{int(time.time())}"} if target else {}
        with open_ledger(where, counter=EstimatingCounter(), **kwargs) as led:
            t = time.perf_counter()
            _import(led, imported)
            print(f"imported {imported:,} requests in {time.perf_counter() - t:.1f} s")
            scope = led.create_session(TENANT, "comal", meta={"workspace": tmp})
            led.append(scope, [Message.user("go")])
            results: dict[int, dict[str, float]] = {}
            for i in range(1, turns + 1):
                _turn(led, scope, i, now)
                if i in (100, turns):
                    results[i] = measure(led, scope, now, repeat)
            if target:
                with led.atomic() as c:
                    c.execute(f"DROP SCHEMA {kwargs['schema']} CASCADE")
    first, last = results[100], results[turns]
    print(f"{'query (ms, median)':44} {'turn 100':>10} {f'turn {turns:,}':>12} {'ratio':>7}")
    for name in first:
        ratio = last[name] / first[name] if first[name] else float("nan")
        print(f"{name:44} {first[name]:10.3f} {last[name]:12.3f} {ratio:7.2f}")
    per_turn = [k for k in first if k.startswith("after:")][:4]  # what every turn runs
    a, b = sum(first[k] for k in per_turn), sum(last[k] for k in per_turn)
    print(f"{'after: per-turn total':44} {a:10.3f} {b:12.3f} {b / a:7.2f}")
    old = [k for k in first if k.startswith("before:")]
    a, b = sum(first[k] for k in old), sum(last[k] for k in old)
    print(f"{'before: per-turn total':44} {a:10.3f} {b:12.3f} {b / a:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", help="a postgresql:// URL (a scratch schema is made and dropped)")
    parser.add_argument("--imported", type=int, default=40_000)
    parser.add_argument("--turns", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    run(args.pg, args.imported, args.turns, args.repeat)


if __name__ == "__main__":
    main()
