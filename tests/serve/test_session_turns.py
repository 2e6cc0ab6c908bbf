"""SessionTurns: one request at a time in a session, taken in a worker thread or waited for on
the event loop, handed on first come first served, never lost to a cancelled waiter."""

from __future__ import annotations

import asyncio
import threading

from comal.serve._proxy import SessionTurns


def test_a_free_turn_is_taken_in_a_thread_and_a_held_one_is_not() -> None:
    # covers: SCL-2
    turns = SessionTurns()
    got: list[bool] = []
    threads = [threading.Thread(target=lambda: got.append(turns.try_take("s"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [False] * 7 + [True]
    assert turns.try_take("other")
    assert turns.held() == 2


def test_waiters_are_handed_the_turn_in_order_and_a_cancelled_one_is_skipped() -> None:
    # covers: SCL-2
    async def run() -> list[str]:
        turns = SessionTurns()
        assert turns.try_take("s")
        order: list[str] = []

        async def wait(name: str) -> None:
            await turns.take("s")
            order.append(name)
            await asyncio.sleep(0)
            turns.give("s")

        a = asyncio.create_task(wait("a"))
        b = asyncio.create_task(wait("b"))
        c = asyncio.create_task(wait("c"))
        await asyncio.sleep(0)
        b.cancel()
        await asyncio.sleep(0)
        turns.give("s")
        await asyncio.gather(a, c)
        assert b.cancelled()
        assert turns.held() == 0
        return order

    assert asyncio.run(run()) == ["a", "c"]


def test_a_waiter_cancelled_as_it_was_handed_the_turn_hands_it_on() -> None:
    async def run() -> None:
        # covers: SCL-2
        turns = SessionTurns()
        assert turns.try_take("s")
        first = asyncio.create_task(turns.take("s"))
        second = asyncio.create_task(turns.take("s"))
        await asyncio.sleep(0)
        turns.give("s")  # handed to the first waiter ...
        first.cancel()  # ... which is cancelled before it runs: the second gets it
        await asyncio.wait_for(second, 5)
        assert first.cancelled()
        turns.give("s")
        assert turns.held() == 0

    asyncio.run(run())
