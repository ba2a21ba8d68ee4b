"""Wake-ups: hints that new work exists (tasks, history events, timers). Losing one delays, never loses.

A process-local hub lets asyncio waiters (long-polls) be woken from the database threads that
commit changes. In Postgres mode the same keys also travel through NOTIFY, sent inside the
transaction (so only committed work is announced) and relayed to each process's hub by a listener.

Shard work (a timer, a transfer or a schedule tick coming due) is announced as a typed ShardDue hint.
Whoever fires it subscribes at app start (the Celery sender, engine/apps.py), so the code that writes
rows never imports the code that processes them; with no subscriber (perdura dev) the hint is the
TIMERS_KEY its in-process loop waits on.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

CHANNEL = "perdura_wakeups"


_TASK_QUEUE_PREFIX = "tq/"


def task_queue_key(namespace_id: object, kind: int, task_queue: str) -> str:
    return f"{_TASK_QUEUE_PREFIX}{namespace_id}/{kind}/{task_queue}"


def run_key(execution_pk: int) -> str:
    return f"run/{execution_pk}"


def query_key(query_id: int) -> str:
    return f"query/{query_id}"


def closed_key(execution_pk: int) -> str:
    """Published once, when the run closes (what result() long-polls wait for)."""
    return f"closed/{execution_pk}"


TIMERS_KEY = "timers"


class Waiter:
    """One registration: create it before checking for work, then await it (no lost wake-ups)."""

    __slots__ = ("_event", "_hub", "_keys", "_loop", "group")

    def __init__(self, hub: Hub, keys: tuple[str, ...], group: str = "") -> None:
        self._hub = hub
        self._keys = keys
        self.group = group
        """Which pollers of a task queue it stands for: a worker deployment version, or "" (unversioned)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def _fire(self) -> None:
        self._loop.call_soon_threadsafe(self._event.set)

    @property
    def fired(self) -> bool:
        return self._event.is_set()

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
    """Waiters by key. Task-queue keys wake one waiter per new task (one of each group); other keys wake
    everyone."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, list[Waiter]] = defaultdict(list)
        self._listeners: list[Callable[[Mapping[str, int]], object]] = []

    def waiter(self, *keys: str, group: str = "") -> Waiter:
        """Register a waiter on `keys`. On a task-queue key, `group` names the pollers it stands for (their
        worker deployment version): a new task wakes one waiter of each group, since the task may be
        routed to any of them and a poller of another version would leave it for its own pollers."""
        w = Waiter(self, keys, group)
        with self._lock:
            for key in keys:
                self._waiters[key].append(w)
        return w

    def _remove(self, w: Waiter) -> None:
        with self._lock:
            for key in w._keys:
                bucket = self._waiters.get(key)
                if bucket is not None and w in bucket:
                    bucket.remove(w)
                    if not bucket:
                        del self._waiters[key]
        if w.fired:
            # It was woken for a task but is leaving (it got work elsewhere, or its caller went away):
            # pass the wake-up on so the task is not left waiting for a re-check.
            self.publish({key: 1 for key in w._keys if key.startswith(_TASK_QUEUE_PREFIX)}, relay=False)

    def publish(self, keys: Mapping[str, int] | Iterable[str], *, relay: bool = True) -> None:
        """Wake waiters on `keys` (key -> number of new items). Safe from any thread."""
        counts = keys if isinstance(keys, Mapping) else dict.fromkeys(keys, 1)
        woken: list[Waiter] = []
        with self._lock:
            for key, count in counts.items():
                bucket = self._waiters.get(key, ())
                if key.startswith(_TASK_QUEUE_PREFIX):
                    taken: dict[str, int] = defaultdict(int)
                    for w in bucket:
                        if not w.fired and taken[w.group] < count:
                            taken[w.group] += 1
                            woken.append(w)
                else:
                    woken.extend(bucket)
        for w in woken:
            w._fire()
        if relay:
            for listener in self._listeners:
                listener(counts)

    def subscribe(self, callback: Callable[[Mapping[str, int]], object]) -> None:
        """Also call `callback(counts)` on every publish (used by the in-process timer loop)."""
        self._listeners.append(callback)


hub = Hub()


def publish_on_commit(keys: Mapping[str, int]) -> None:
    """Announce `keys` once the current transaction commits (and over NOTIFY to other processes)."""
    if not keys:
        return
    if connection.vendor == "postgresql":
        # One statement for all of them: a workflow task's completion announces five or more keys.
        params: list[str] = []
        for key, count in keys.items():
            params += [CHANNEL, f"{key}|{count}"]
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(keys)), params)
    transaction.on_commit(lambda: hub.publish(keys))


def parse_payload(payload: str) -> dict[str, int]:
    key, _, count = payload.rpartition("|")
    return {key: int(count)} if key and count.isdigit() else {payload: 1}


@dataclass(frozen=True, slots=True)
class ShardDue:
    """A hint that `shard` has work due at `at` (None: now)."""

    shard: int
    at: datetime | None = None


_shard_due_senders: list[Callable[[ShardDue], object]] = []


def on_shard_due(sender: Callable[[ShardDue], object]) -> None:
    """Call `sender(hint)` after commit for every ShardDue hint (subscribed once, at app start)."""
    _shard_due_senders.append(sender)


def shard_workers_listen() -> bool:
    """Whether shard work is fired by shard workers that hear ShardDue hints (else by perdura dev's loop)."""
    return bool(_shard_due_senders)


def shard_due_on_commit(hint: ShardDue) -> None:
    """Send `hint` to the subscribed senders once the current transaction commits."""
    transaction.on_commit(lambda: _send_shard_due(hint))


def _send_shard_due(hint: ShardDue) -> None:
    for sender in _shard_due_senders:
        sender(hint)
