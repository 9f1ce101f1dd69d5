"""ClaimSignal: one waiting claim woken per rollout queued, across threads and event loops."""

from __future__ import annotations

import asyncio
import threading

from lightningstore.sql.claim_signal import ClaimSignal


async def test_a_permit_released_before_the_wait_is_taken_at_once() -> None:
    signal = ClaimSignal()
    signal.release(2)
    assert await signal.acquire(0.01) and await signal.acquire(0.01)
    assert not await signal.acquire(0.05)  # both used: the third waits out its time


async def test_each_release_wakes_one_waiter_not_all() -> None:
    signal = ClaimSignal()
    waiters = [asyncio.create_task(signal.acquire(0.5)) for _ in range(3)]
    await asyncio.sleep(0.05)
    signal.release(1)
    assert sorted(await asyncio.gather(*waiters)) == [False, False, True]


async def test_a_release_from_another_thread_wakes_a_waiter_on_this_loop() -> None:
    signal = ClaimSignal()
    waiting = asyncio.create_task(signal.acquire(10))
    await asyncio.sleep(0.05)
    thread = threading.Thread(target=signal.release, args=(1,))
    thread.start()
    assert await asyncio.wait_for(waiting, 5)
    thread.join()


async def test_a_taken_permit_is_not_given_twice() -> None:
    signal = ClaimSignal()
    signal.release(1)
    signal.take(1)  # a claim that did not wait got that rollout
    assert not await signal.acquire(0.05)


async def test_a_cancelled_waiter_passes_its_permit_on() -> None:
    signal = ClaimSignal()
    first = asyncio.create_task(signal.acquire(10))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(signal.acquire(10))
    await asyncio.sleep(0.02)
    signal.release(1)  # handed to `first`, which is cancelled before it runs
    first.cancel()
    assert await asyncio.wait_for(second, 5)


def test_a_waiter_whose_loop_closed_is_skipped() -> None:
    signal = ClaimSignal()
    dead = asyncio.new_event_loop()
    signal._waiters.append(dead.create_future())  # a waiter left on a loop that then closed
    dead.close()

    async def live() -> bool:
        waiting = asyncio.create_task(signal.acquire(10))
        await asyncio.sleep(0.02)
        signal.release(1)  # skips the dead waiter (no RuntimeError into the committing thread)
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(live())
