"""Wake-ups: hints that new work exists (tasks, history events, timers). Losing one delays, never loses.

A process-local hub lets asyncio waiters (long-polls) be woken from the database threads that
commit changes. In Postgres mode the same keys also travel through NOTIFY, sent inside the
transaction (so only committed work is announced) and relayed to each process's hub by a listener.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Iterable

from django.db import connection, transaction

CHANNEL = "perdura_wakeups"


def task_queue_key(namespace_id: object, kind: int, task_queue: str) -> str:
    return f"tq/{namespace_id}/{kind}/{task_queue}"


def run_key(execution_pk: int) -> str:
    return f"run/{execution_pk}"


TIMERS_KEY = "timers"


class Waiter:
    """One registration: create it before checking for work, then await it (no lost wake-ups)."""

    __slots__ = ("_event", "_hub", "_keys", "_loop")

    def __init__(self, hub: Hub, keys: tuple[str, ...]) -> None:
        self._hub = hub
        self._keys = keys
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def _fire(self) -> None:
        self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout=max(timeout, 0))
        except TimeoutError:
            return False
        return True

    def rearm(self) -> None:
        self._event.clear()

    def close(self) -> None:
        self._hub._remove(self)

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Hub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = defaultdict(set)
        self._listeners: list[object] = []

    def waiter(self, *keys: str) -> Waiter:
        w = Waiter(self, keys)
        with self._lock:
            for key in keys:
                self._waiters[key].add(w)
        return w

    def _remove(self, w: Waiter) -> None:
        with self._lock:
            for key in w._keys:
                bucket = self._waiters.get(key)
                if bucket is not None:
                    bucket.discard(w)
                    if not bucket:
                        del self._waiters[key]

    def publish(self, keys: Iterable[str]) -> None:
        """Wake everything waiting on any of `keys`. Safe from any thread."""
        with self._lock:
            woken = {w for key in keys for w in self._waiters.get(key, ())}
        for w in woken:
            w._fire()
        for listener in self._listeners:
            listener(keys)  # type: ignore[operator]

    def subscribe(self, callback: object) -> None:
        """Also call `callback(keys)` on every publish (used by the in-process timer loop)."""
        self._listeners.append(callback)


hub = Hub()


def publish_on_commit(keys: set[str]) -> None:
    """Announce `keys` once the current transaction commits (and over NOTIFY to other processes)."""
    if not keys:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for key in keys:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, key])
    transaction.on_commit(lambda: hub.publish(keys))
