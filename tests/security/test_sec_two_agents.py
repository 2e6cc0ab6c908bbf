"""Issue 30, item 8: two library users on one session, without its lock, split its steps.

Each thread builds its house and agent through the public API (``House(...)``, ``Agent(...)``
as the ``comal.agent`` docstring shows) on the same session, each on its own ledger
connection, and runs a task of effectful calls (Writes). Without the session lock their steps
interleave: an assistant step of one lands between the other's call and its result, and
``verify`` reports split steps (85 of them, with 120 receipts for 118 commands, in the attack
run). Now a house whose guard is not held refuses every call with effects
(``SESSION_NOT_HELD``), and an agent refuses to run before it appends anything, so the records
stay whole; with ``lock_session`` taken by each user, one runs and the other is refused
(``SESSION_LOCKED``) or runs after it, and every Write has exactly one receipt.
"""

# covers: OPS-3, RES-2, LED-4

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _agent_support import settings_for
from _pg_support import BACKENDS, LedgerStore, open_store
from comal.agent import Agent, lock_session
from comal.errors import ComalError
from comal.ledger import Scope, verify
from comal.messages import Message, ToolCall
from comal.ops import Actor, House, Policy, Workspace, default_registry, receipts
from comal.providers import ModelRequest
from comal.testing import FunctionProvider

CALLS = 30  # Writes each user's model asks for


def _slow_effect(phase: str, call_id: str) -> None:
    """Each write takes a moment once prepared, as real effects do, so the other user's step
    can land while it runs."""
    if phase == "prepared":
        time.sleep(0.002)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerStore]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def _writer(k: int) -> FunctionProvider:
    """A model that asks for CALLS Writes, one a turn, then answers."""
    asked = 0

    def reply(req: ModelRequest) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        if asked > CALLS:
            return {"content": [{"type": "text", "text": f"user {k}: done"}]}
        cid = f"u{k}-{asked}"
        write = {"path": f"out/{cid}.txt", "content": cid}
        return {"content": [{"type": "tool_use", "id": cid, "name": "Write", "input": write}]}

    return FunctionProvider(reply)


def _two_users(store: LedgerStore, ws: Path, *, lock: bool) -> tuple[Scope, Counter[str]]:
    led = store.open()
    scope = led.create_session("t", "a")
    led.close()
    codes: Counter[str] = Counter()
    start = threading.Barrier(2)

    def user(k: int) -> None:
        led = store.open()
        try:
            house = House(
                led, scope, default_registry(), Policy(mode="trusted"), workspace=Workspace(ws),
                probe=_slow_effect,
            )  # fmt: skip
            agent = Agent(led, scope, _writer(k), house, settings_for(max_turns=CALLS + 5))
            start.wait()
            try:
                if lock:
                    with lock_session(led, scope):
                        agent.run(f"user {k}: write your files")
                else:
                    agent.run(f"user {k}: write your files")
                codes["finished"] += 1
            except ComalError as exc:
                codes[exc.code] += 1
        finally:
            led.close()

    threads = [threading.Thread(target=user, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a user hung"
    return scope, codes


def _whole(store: LedgerStore, ws: Path, scope: Scope) -> tuple[set[str], list[str]]:
    """The Writes that landed, checked against the receipts; and verify's split steps."""
    written = {p.stem for p in (ws / "out").glob("*.txt")} if (ws / "out").exists() else set()
    led = store.open()
    try:
        got = receipts(led, scope)
        report = verify(led)
    finally:
        led.close()
    ran = Counter(r.call_id for r in got if r.operation == "Write" and r.status == "ok")
    assert set(ran) == written and set(ran.values()) <= {1}  # one receipt per effect
    split = [f.detail for f in report.faults if f.kind in ("split-step", "step")]
    return written, split


def test_two_users_without_the_lock_are_refused_before_anything_is_written(
    store: LedgerStore, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    scope, codes = _two_users(store, ws, lock=False)
    written, split = _whole(store, ws, scope)
    assert split == []
    assert codes == Counter({"SESSION_NOT_HELD": 2}) and written == set()
    led = store.open()
    try:
        assert led.entries(scope) == []  # refused before the prompt was appended
    finally:
        led.close()


def test_two_users_each_taking_the_lock_leave_whole_records(
    store: LedgerStore, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    scope, codes = _two_users(store, ws, lock=True)
    written, split = _whole(store, ws, scope)
    assert split == []
    # One ran; the other was refused by the lock, or ran after the first let it go.
    assert codes["finished"] >= 1 and set(codes) <= {"finished", "SESSION_LOCKED"}
    assert len(written) == CALLS * codes["finished"]


def test_a_house_built_without_a_guard_refuses_effects_with_a_coded_error(
    store: LedgerStore, tmp_path: Path
) -> None:
    # The house alone, as a library proposes the model's calls: nothing with effects runs
    # unless this process holds the session's lock; reads still do.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "seen.txt").write_text("x")
    led = store.open()
    try:
        scope = led.create_session("t", "a")
        house = House(led, scope, default_registry(), Policy(mode="trusted"),
                      workspace=Workspace(ws))  # fmt: skip
        ana = Actor.user("ana")
        write = ToolCall("w1", "Write", '{"path": "w.txt", "content": "y"}')
        step = led.append(scope, [Message.assistant("", write)])[0].step
        outcome, receipt = house.handle(write, ana, join_step=step)
        assert receipt.observations["error"] == "SESSION_NOT_HELD" and not (ws / "w.txt").exists()
        assert outcome.result.is_error and "lock_session" in outcome.result.text
        assert not led.records(scope, "preparation")  # refused before its preparation
        read = ToolCall("r1", "Read", '{"path": "seen.txt"}')
        step = led.append(scope, [Message.assistant("", read)])[0].step
        assert house.handle(read, ana, join_step=step)[1].status == "ok"
        # Under the lock, taken after the house was built, the same house runs it.
        again = ToolCall("w2", "Write", '{"path": "w.txt", "content": "y"}')
        step = led.append(scope, [Message.assistant("", again)])[0].step
        with lock_session(led, scope):
            assert house.handle(again, ana, join_step=step)[1].status == "ok"
        assert (ws / "w.txt").read_text() == "y"
    finally:
        led.close()
