"""The database threads take urgent work (a shard loop's turn) ahead of the API calls queued before it."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
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


def _inline_without_a_database(monkeypatch) -> None:
    """`configure(0)`, with the health check of old connections off: these tests use no database, and a
    connection an earlier test on this worker left open would send the check to it, which pytest-django
    refuses outside a django_db test."""
    monkeypatch.setattr(dbthreads, "_pool", None)
    monkeypatch.setattr(dbthreads, "_inline", True)
    monkeypatch.setattr(dbthreads, "close_old_connections", lambda: None)


async def test_without_threads_the_work_runs_on_the_callers_thread_in_a_copy_of_its_context(monkeypatch):
    """`perdura dev` (configure(0)): no hand-over, but a call stays a point where other tasks run, and
    what it sets in its context stays there, as on a thread."""
    _inline_without_a_database(monkeypatch)
    seen = contextvars.ContextVar("seen", default="unset")
    seen.set("caller")

    def work() -> tuple[int, str]:
        here = seen.get()
        seen.set("inside")
        return threading.get_ident(), here

    others: list[int] = []

    async def other() -> None:
        others.append(len(others))

    sibling = asyncio.ensure_future(other())
    assert await dbthreads.run(work) == (threading.get_ident(), "caller")
    assert others == [0], "the call let a task that was ready run first"
    assert seen.get() == "caller"
    await sibling


async def test_without_threads_the_calls_of_every_task_share_the_threads_database_connection(monkeypatch):
    """Django keeps a connection per asyncio task under a running loop; the calls run as if without one,
    so the loop's thread has one connection, as a database thread has, and Django lets them through."""
    from django.db import connections

    _inline_without_a_database(monkeypatch)
    loop = asyncio.get_running_loop()

    def work() -> tuple[object, object]:
        return asyncio.events._get_running_loop(), connections["default"]

    async def in_a_task() -> tuple[object, object]:
        return await dbthreads.run(work)

    first, second = await asyncio.gather(
        asyncio.ensure_future(in_a_task()), asyncio.ensure_future(in_a_task())
    )
    assert first[0] is None
    assert first[1] is second[1]
    assert asyncio.get_running_loop() is loop


def test_configure_zero_means_no_threads(monkeypatch):
    monkeypatch.setattr(dbthreads, "_pool", None)
    monkeypatch.setattr(dbthreads, "_inline", False)
    dbthreads.configure(0)
    assert dbthreads._inline
    assert dbthreads._pool is None
    dbthreads.configure(2)
    assert not dbthreads._inline
    assert dbthreads._pool is not None


async def test_calls_of_one_key_take_turns_on_one_thread_while_other_keys_go_on(monkeypatch):
    """A run's writes wait for each other on the event loop, not each on a database thread for its row."""
    pool = dbthreads._Pool(4)
    monkeypatch.setattr(dbthreads, "_pool", pool)
    release = threading.Event()
    running: list[str] = []
    most = 0
    lock = threading.Lock()

    def write(name: str) -> str:
        nonlocal most
        with lock:
            running.append(name)
            most = max(most, sum(1 for r in running if r.startswith("hot")))
        release.wait(5)
        with lock:
            running.remove(name)
        return name

    hot = [asyncio.ensure_future(dbthreads.run_in_turn(("ns", "hot"), write, f"hot-{i}")) for i in range(5)]
    await asyncio.sleep(0.05)
    assert pool._threads == 1, "calls waiting for their turn took threads"
    release_other = asyncio.ensure_future(dbthreads.run_in_turn(("ns", "other"), sum, [1, 2]))
    assert await asyncio.wait_for(release_other, 2) == 3, "another key waited for the hot one"
    release.set()
    assert await asyncio.gather(*hot) == [f"hot-{i}" for i in range(5)]
    assert most == 1
    assert dbthreads._turns == {}


async def test_a_caller_that_goes_away_keeps_the_turn_until_its_work_ends(monkeypatch):
    """Else callers with short deadlines could put every thread to waiting on one row again."""
    monkeypatch.setattr(dbthreads, "_pool", dbthreads._Pool(4))
    release = threading.Event()
    started: list[str] = []

    def write(name: str) -> None:
        started.append(name)
        release.wait(5)

    first = asyncio.ensure_future(dbthreads.run_in_turn("run", write, "first"))
    for _ in range(500):  # until a thread runs it
        if started:
            break
        await asyncio.sleep(0.01)
    second = asyncio.ensure_future(dbthreads.run_in_turn("run", write, "second"))
    await asyncio.sleep(0.01)
    first.cancel()
    await asyncio.sleep(0.1)
    assert started == ["first"], "the next call started while the cancelled one's work still ran"
    release.set()
    await asyncio.wait_for(second, 2)
    assert started == ["first", "second"]
    assert dbthreads._turns == {}


async def test_work_whose_caller_left_before_a_thread_took_it_is_dropped_and_passes_the_turn(monkeypatch):
    monkeypatch.setattr(dbthreads, "_pool", dbthreads._Pool(1))
    release = threading.Event()
    done: list[str] = []
    busy = asyncio.ensure_future(dbthreads.run(release.wait, 5))  # the one thread
    await asyncio.sleep(0.05)
    left = asyncio.ensure_future(dbthreads.run_in_turn("run", done.append, "left"))
    stays = asyncio.ensure_future(dbthreads.run_in_turn("run", done.append, "stays"))
    await asyncio.sleep(0.01)
    left.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await left  # the cancel has reached the queued work (else the thread could take it first)
    release.set()
    await asyncio.wait_for(asyncio.gather(busy, stays), 2)
    assert done == ["stays"]
    assert dbthreads._turns == {}
