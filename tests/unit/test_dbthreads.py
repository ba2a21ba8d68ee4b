"""The database threads take urgent work (a shard loop's turn) ahead of the API calls queued before it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine import dbthreads


async def test_urgent_work_goes_ahead_of_the_queue_and_normal_work_keeps_its_order(monkeypatch):
    monkeypatch.setattr(dbthreads, "_pool", dbthreads._Pool(1))
    order: list[str] = []
    release = threading.Event()
    busy = asyncio.ensure_future(dbthreads.run(release.wait, 5))
    await asyncio.sleep(0.05)  # the one thread is in `busy`; what follows queues
    queued = [asyncio.ensure_future(dbthreads.run(order.append, f"api-{i}")) for i in range(3)]
    await asyncio.sleep(0.01)
    urgent = asyncio.ensure_future(dbthreads.run_urgent(order.append, "timers"))
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(busy, *queued, urgent)
    assert order == ["timers", "api-0", "api-1", "api-2"]


async def test_an_error_reaches_the_caller_and_the_thread_goes_on(monkeypatch):
    monkeypatch.setattr(dbthreads, "_pool", dbthreads._Pool(1))

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await dbthreads.run_urgent(fail)
    assert await dbthreads.run(sum, [1, 2]) == 3


async def test_a_thread_is_started_only_when_none_is_idle(monkeypatch):
    """Each thread keeps a database connection: calls one after another need one thread, not sixteen."""
    pool = dbthreads._Pool(16)
    monkeypatch.setattr(dbthreads, "_pool", pool)
    for i in range(20):
        assert await dbthreads.run(int, i) == i
    assert pool._threads == 1
    release = threading.Event()
    waiting = [asyncio.ensure_future(dbthreads.run(release.wait, 5)) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert pool._threads == 3
    release.set()
    await asyncio.gather(*waiting)
