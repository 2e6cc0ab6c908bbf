"""Issue 18: two houses on one session without its lock never run a call unrecorded.

Library use built ``House(...)`` directly, with no guard (the agent's guard is the session
lock); since issue 30 such a house guards the session's lock itself
(``test_sec_two_agents.py``), and only ``guard=unguarded`` gives a house without one. Two such
houses, each with its own ledger connection, each proposing calls the model's
way (append the assistant step, run, record), interleave their steps: a call's result could
no longer join its step, ``record()`` failed after the call had run, and 120 writes left 7
receipts. Now each house either refuses before any effect (its step was overtaken when the
preparation was written) or, when the step was overtaken while the call ran, still records the
receipt and then raises ``SESSION_CONTENDED``: receipts equal the effects, call for call.
"""

# covers: OPS-3, RES-3, LED-4

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _pg_support import BACKENDS, LedgerStore, open_store
from comal.errors import ComalError
from comal.ledger import Scope
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, receipts, unguarded

ANA = Actor.user("ana")
CALLS = 60  # per house: 120 in all


def _slow_effect(phase: str, call_id: str) -> None:
    """The house's probe: each write takes a moment once prepared, as real effects do, so the
    other house's step can land while it runs (without it the race is left to chance)."""
    if phase == "prepared":
        time.sleep(0.002)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def _race(
    store: LedgerStore, ws: Path, propose: Callable[[House, Scope, ToolCall], None]
) -> tuple[Scope, Counter[str]]:
    """Two houses, each on its own connection, proposing CALLS writes at once."""
    led = store.open()
    scope = led.create_session("t", "a")
    led.close()
    raised: Counter[str] = Counter()
    start = threading.Barrier(2)

    def house_loop(k: int) -> None:
        led = store.open()
        house = House(
            led,
            scope,
            default_registry(),
            Policy(mode="trusted"),
            workspace=Workspace(ws),
            probe=_slow_effect,
            guard=unguarded,
        )
        start.wait()
        for i in range(CALLS):
            cid = f"h{k}-{i}"
            call = ToolCall(cid, "Write", json.dumps({"path": f"out/{cid}.txt", "content": cid}))
            try:
                propose(house, scope, call)
            except ComalError as exc:
                raised[exc.code] += 1
        led.close()

    threads = [threading.Thread(target=house_loop, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a house hung"
    return scope, raised


def _check(store: LedgerStore, ws: Path, scope: Scope, raised: Counter[str]) -> None:
    written = {p.stem for p in (ws / "out").glob("*.txt")} if (ws / "out").exists() else set()
    led = store.open()
    got = receipts(led, scope)
    preparations = led.records(scope, "preparation")
    led.close()
    per_call = Counter(r.call_id for r in got)
    assert sum(per_call.values()) == 2 * CALLS and set(per_call.values()) == {1}
    ran = {r.call_id for r in got if r.status == "ok"}
    assert ran == written  # receipts == executed effects, call for call
    assert {p.body["call_id"] for p in preparations} == written
    assert {r.preparation for r in got if r.status == "ok"} == {p.id for p in preparations}
    assert set(raised) <= {"SESSION_CONTENDED"}
    for r in got:
        if r.result_entry is None:
            unjoined = r.observations.get("unjoined") or {}
            assert unjoined.get("code") == "SESSION_CONTENDED" or r.status != "ok", r
            if r.status == "ok":
                assert r.output is not None and r.output.stored is not None  # the text is kept


def _handle(house: House, scope: Scope, call: ToolCall) -> None:
    step = house.ledger.append(scope, [Message.assistant("", call)])[0].step
    house.handle(call, ANA, join_step=step)


def _run_then_record(house: House, scope: Scope, call: ToolCall) -> None:
    step = house.ledger.append(scope, [Message.assistant("", call)])[0].step
    house.record(house.run(call, ANA), join_step=step)


@pytest.mark.parametrize("propose", [_handle, _run_then_record], ids=["handle", "run-record"])
def test_two_unguarded_houses_leave_a_receipt_for_every_effect(
    store: LedgerStore, tmp_path: Path, propose: Callable[[House, Scope, ToolCall], None]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    scope, raised = _race(store, ws, propose)
    _check(store, ws, scope, raised)


def test_a_call_whose_step_was_overtaken_does_not_run(store: LedgerStore, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    led = store.open()
    scope = led.create_session("t", "a")
    house = House(
        led, scope, default_registry(), Policy(mode="trusted"), workspace=Workspace(ws),
        guard=unguarded,
    )  # fmt: skip
    late = ToolCall("late", "Write", json.dumps({"path": "late.txt", "content": "x"}))
    step = led.append(scope, [Message.assistant("", late)])[0].step
    other = ToolCall("other", "Write", json.dumps({"path": "other.txt", "content": "y"}))
    led.append(scope, [Message.assistant("", other)])  # a second writer gets in first
    with pytest.raises(ComalError) as err:
        house.handle(late, ANA, join_step=step)
    assert err.value.code == "SESSION_CONTENDED"
    assert not (ws / "late.txt").exists() and not led.records(scope, "preparation")
    (receipt,) = receipts(led, scope)
    assert receipt.call_id == "late" and receipt.observations["error"] == "SESSION_CONTENDED"
    led.close()
