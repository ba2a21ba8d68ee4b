"""Running Django ORM work from asyncio code (gRPC server, shard loop): a bounded pool, healthy connections.

Work is taken by priority, then in order of arrival: a due timer's pass goes ahead of the API calls queued
behind it (under load, 50 of them made timers 100-500 ms late), instead of waiting its turn.

`perdura dev` has no database thread: its event loop runs the work itself (`configure(0)`). Its one SQLite
writer takes the calls one at a time anyway, and handing each to a thread and back cost more than most
calls' work: the hand-overs, and the two threads taking the GIL from each other (one_activity at
concurrency 32: 19.5 to 13.1 ms of CPU per workflow, 45 to 74 workflows/s; bench/README.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import itertools
import queue
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from django.db import close_old_connections

T = TypeVar("T")

URGENT, NORMAL = 0, 1
"""Priorities: shard passes (timers due now) are URGENT, the API's calls NORMAL."""


class _Pool:
    """Up to `most` database threads, each taking the most urgent work queued, the oldest first. A thread is
    started only when work comes and none is idle (as concurrent.futures' pool does): each keeps a database
    connection, and a process that never has 16 calls at once should not hold 16."""

    def __init__(self, most: int) -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, concurrent.futures.Future[Any], Callable[[], Any]]]
        self._queue = queue.PriorityQueue()
        self._order = itertools.count()
        self._most = most
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, priority: int, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((priority, next(self._order), future, fn))
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # an idle thread will take it (or one like it)
            elif self._threads < self._most:
                self._threads += 1
                threading.Thread(target=self._work, name=f"perdura-db_{self._threads}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            _, _, future, fn = self._queue.get()
            if not future.set_running_or_notify_cancel():  # its caller went away before it started
                self._idle_again()
                continue
            try:
                result = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the caller, as an executor does
                # Idle before the caller hears: its next call, sent at once, finds this thread free.
                self._idle_again()
                future.set_exception(e)
            else:
                self._idle_again()
                future.set_result(result)

    def _idle_again(self) -> None:
        with self._lock:
            self._idle += 1


_pool: _Pool | None = None
_inline = False


def configure(max_workers: int) -> None:
    """Up to `max_workers` database threads; with 0, none: the work runs on the caller's thread, between
    its awaits (`_call_on_loop_thread`)."""
    global _pool, _inline
    _inline = max_workers == 0
    _pool = None if _inline else _Pool(max_workers)


def _call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    close_old_connections()
    return fn(*args, **kwargs)


def _call_on_loop_thread(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    """`_call` on the event loop's thread, as if on a thread without a loop: Django then keeps one
    connection for the thread (it keeps one per asyncio task under a running loop) and lets the calls
    through (it refuses synchronous database calls under one). Each of Django's checks for a running loop
    also cost a getpid() system call on Python 3.11."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        return _call(fn, args, kwargs)
    finally:
        asyncio.events._set_running_loop(loop)


async def _run(priority: int, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    # In a copy of the caller's context (as asyncio.to_thread does), so context variables such as the
    # audit log's actor reach it.
    context = contextvars.copy_context()
    if _inline:
        # A call is still a point where other tasks run, as with a thread: a loop of calls must not keep
        # the event loop to itself.
        await asyncio.sleep(0)
        return context.run(_call_on_loop_thread, fn, args, kwargs)
    return await asyncio.wrap_future(_submit(priority, context, fn, args, kwargs))


def _submit(
    priority: int,
    context: contextvars.Context,
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> concurrent.futures.Future[T]:
    global _pool
    if _pool is None:
        _pool = _Pool(16)
    return _pool.submit(priority, functools.partial(context.run, _call, fn, args, kwargs))


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on a database thread and await its result."""
    return await _run(NORMAL, fn, args, kwargs)


async def run_urgent(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn` on a database thread ahead of the NORMAL work waiting for one, and await its result."""
    return await _run(URGENT, fn, args, kwargs)


class _Turn:
    """The calls of one key: the one whose work exists holds `lock`, the others wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


_turns: dict[Hashable, _Turn] = {}


async def run_in_turn(key: Hashable, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`run`, one call of `key` at a time, in order of arrival.

    A run's writes each lock its row: sent at once, every one of them but the first would hold a database
    thread only to wait for that lock, and a tenant aiming its calls at one run would take every thread of
    the process from the others. Here they wait on the event loop, so a run holds at most one thread (as
    Temporal's history service holds a lock per workflow). A call whose caller goes away keeps the turn
    until its work is dropped or done: else a caller with short deadlines could again put every thread
    to waiting on the row."""
    if _inline:  # one call at a time already
        return await _run(NORMAL, fn, args, kwargs)
    turn = _turns.get(key)
    if turn is None:
        turn = _turns[key] = _Turn()
    turn.users += 1
    try:
        await turn.lock.acquire()
    except BaseException:
        _leave(key, turn, locked=False)
        raise
    loop = asyncio.get_running_loop()
    try:
        work = _submit(NORMAL, contextvars.copy_context(), fn, args, kwargs)
    except BaseException:
        _leave(key, turn, locked=True)
        raise
    # Cancelling the awaiting caller cancels `work` if no thread has taken it yet; either way its end,
    # on whichever thread, gives the turn to the next call.
    work.add_done_callback(lambda _: loop.call_soon_threadsafe(_leave, key, turn, True))
    return await asyncio.wrap_future(work)


def _leave(key: Hashable, turn: _Turn, locked: bool) -> None:
    if locked:
        turn.lock.release()
    turn.users -= 1
    if not turn.users:
        del _turns[key]
