"""Wake-ups: hints that new work exists (tasks, history events, timers). Losing one delays, never loses.

A process-local hub lets asyncio waiters (long-polls) be woken from the database threads that
commit changes. In Postgres mode the same keys also travel through NOTIFY, sent inside the
transaction (so only committed work is announced) and relayed to each process's hub by a listener.

Shard work (a timer, a transfer or a schedule tick coming due) is announced on its shard's key: the loop
that holds the shard (engine/shards/loop.py) wakes for it, in `perdura dev`'s process or, over NOTIFY, in a
shard worker's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

log = logging.getLogger("perdura.api")

CHANNEL = "perdura_wakeups"
SHARD_CHANNEL = "perdura_shard_wakeups"
"""Shard keys travel apart: only the shard loops listen to them, and the loops hear no task-queue or run
wake-ups (every API commit sends some)."""


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


_SHARD_PREFIX = "shard/"


def shard_key(shard: int) -> str:
    """The key of new work in `shard` (a timer due soon, a transfer, a schedule tick)."""
    return f"{_SHARD_PREFIX}{shard}"


def shard_of(key: str) -> int | None:
    """The shard a `shard_key` names (None for any other key)."""
    if not key.startswith(_SHARD_PREFIX):
        return None
    number = key[len(_SHARD_PREFIX) :]
    return int(number) if number.isdigit() else None


class Waiter:
    """One registration: create it before checking for work, then await it (no lost wake-ups).

    A task-queue poll may also stand ready to be handed a task directly (`offer`, engine/matching/handoff.py):
    while it waits, the transaction that makes a task for its queue may start that task for it (`reserve`)
    and, once committed, hand it the result (`hand`) instead of writing the task's row and waking it.
    """

    __slots__ = ("_event", "_hub", "_keys", "_loop", "_woken", "group", "handed", "idle", "offer", "reserved")

    def __init__(self, hub: Hub, keys: tuple[str, ...], group: str = "") -> None:
        self._hub = hub
        self._keys = keys
        self.group = group
        """Which pollers of a task queue it stands for: a worker deployment version, or "" (unversioned)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._woken = False
        """A publish chose it (set at once, under the hub's lock; the event is set later, on its loop)."""
        self.offer: Callable[..., Any] | None = None
        """How to start a task for this poll, in the transaction that makes it (None: it takes none that way)."""
        self.idle = False
        """Waiting (not claiming): only then may a transaction reserve it."""
        self.reserved = False
        self.handed: Any = None

    def _fire(self) -> None:
        self._loop.call_soon_threadsafe(self._event.set)

    @property
    def fired(self) -> bool:
        return self._woken or self._event.is_set()

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event.wait(), timeout=max(timeout, 0))
        except TimeoutError:
            return False
        return True

    def rearm(self) -> None:
        self._woken = False
        self._event.clear()

    def begin_idle(self) -> None:
        """The poll found nothing and is about to wait: a transaction may reserve it from now on."""
        with self._hub._lock:
            self.idle = True

    def end_idle(self) -> bool:
        """The wait ended: no transaction may reserve it any more. False while one holds it (then wait for
        `hand`, or for `release`, which wakes it, and ask again)."""
        with self._hub._lock:
            if self.reserved:
                return False
            self.idle = False
            return True

    async def settle(self) -> None:
        """End the wait (`end_idle`), first waiting for the transaction that holds this poll, if one does:
        its answer (`handed`) or its release is a transaction's length away."""
        while True:
            self._event.clear()  # hand and release change the state before they wake it: nothing is missed
            if self.end_idle():
                return
            await self._event.wait()

    def hand(self, result: Any) -> None:
        """The reserving transaction committed: `result` is this poll's answer."""
        with self._hub._lock:
            gone = self.offer is None  # its poll left while the transaction ran (cancelled by its caller)
            self.handed = result
            self.reserved = False
            self.idle = False
            self._woken = True  # taken: no publish picks it any more, and leaving passes nothing on
        if gone:
            log.warning(
                "a task was started for a poll whose caller went away before its answer; "
                "it is started again after its timeout"
            )
        self._fire()

    def release(self) -> None:
        """The reserving transaction did not commit (or the task was not for it): it waits as before."""
        with self._hub._lock:
            self.reserved = False
        self._fire()  # it may have gone past its deadline while reserved: let it look again

    def close(self) -> None:
        self._hub._remove(self)

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


EMPTY_FOR = timedelta(seconds=1)
"""How long a claim that found a task queue empty vouches for it when no wake-up came since: a poll in
that time is answered from memory, and looks at the queue itself once that lapses. A wake-up is a hint and
may be lost; this bounds what one costs a poll that arrives after it."""
_EMPTY_MOST = 10_000


class Hub:
    """Waiters by key. Task-queue keys wake one waiter per new task (one of each group); other keys wake
    everyone. The hub also remembers task queues a claim found empty (`mark_empty`) until a wake-up for one
    comes: a worker's next poll, sent as soon as it took a task, then costs no transaction."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, list[Waiter]] = defaultdict(list)
        self._listeners: list[Callable[[Mapping[str, int]], object]] = []
        self._published: dict[str, int] = {}
        """Wake-ups published so far per task-queue key: a claim notes its queue's before reading it."""
        self._generation = 0
        """Bumped when `_published` is cleared (to bound it), which voids what claims noted before."""
        self._empty: dict[str, datetime] = {}
        """Task-queue keys a claim found empty, and until when that stands without a wake-up."""

    def epoch(self, key: str) -> tuple[int, int]:
        """Where the wake-ups of `key` stand: what `mark_empty` compares with."""
        with self._lock:
            return self._generation, self._published.get(key, 0)

    def mark_empty(
        self, key: str, since: tuple[int, int], visible_at: datetime | None, now: datetime
    ) -> None:
        """A claim that began at `since` (`epoch(key)`) found nothing visible on the queue of `key` (its
        earliest task visible at `visible_at`, if any). Kept unless a wake-up for the queue came meanwhile:
        the claim may have read the queue before that task committed."""
        until = now + EMPTY_FOR if visible_at is None else min(now + EMPTY_FOR, visible_at)
        with self._lock:
            if since != (self._generation, self._published.get(key, 0)) or until <= now:
                self._empty.pop(key, None)
                return
            if len(self._empty) >= _EMPTY_MOST:
                self._empty.clear()
            self._empty[key] = until

    def known_empty(self, key: str, now: datetime) -> datetime | None:
        """Until when the queue of `key` is known to have nothing to take (None: unknown). It is while a claim
        found it so less than EMPTY_FOR ago, before its next task became visible, and no wake-up for it came
        since. Ask after registering the poll's waiter, so a wake-up that comes after the answer reaches it."""
        until = self._empty.get(key)
        if until is None or until <= now:
            return None
        return until

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
            w.offer = None
            w.idle = False
            for key in w._keys:
                bucket = self._waiters.get(key)
                if bucket is not None and w in bucket:
                    bucket.remove(w)
                    if not bucket:
                        del self._waiters[key]
        if w._woken and w.handed is None:
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
                    if len(self._published) >= _EMPTY_MOST and key not in self._published:
                        self._published.clear()
                        self._generation += 1
                    self._published[key] = self._published.get(key, 0) + 1
                    self._empty.pop(key, None)
                    taken: dict[str, int] = defaultdict(int)
                    for w in bucket:
                        if not (w._woken or w.reserved) and taken[w.group] < count:
                            taken[w.group] += 1
                            w._woken = True
                            woken.append(w)
                else:
                    for w in bucket:
                        w._woken = True
                        woken.append(w)
        for w in woken:
            w._fire()
        if relay:
            for listener in self._listeners:
                listener(counts)

    def reserve(self, key: str) -> Waiter | None:
        """Take a poll waiting on the task queue of `key` that stands ready to be handed a task (`offer`) and
        was not woken for another; nothing else wakes or reserves it until `hand` or `release`."""
        with self._lock:
            for w in self._waiters.get(key, ()):
                if w.offer is not None and w.idle and not (w._woken or w.reserved or w.group):
                    w.reserved = True
                    return w
        return None

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
        calls, params = notify_calls(keys)
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(calls), params)
    publish_here_on_commit(keys)


def notify_calls(keys: Mapping[str, int]) -> tuple[list[str], list[str]]:
    """The NOTIFYs of `keys` as `pg_notify` calls, for a statement the caller sends in its transaction (then
    `publish_here_on_commit` wakes this process's waiters)."""
    params: list[str] = []
    for key, count in keys.items():
        channel = SHARD_CHANNEL if key.startswith(_SHARD_PREFIX) else CHANNEL
        params += [channel, f"{key}|{count}|{_origin}"]
    return ["pg_notify(%s, %s)"] * len(keys), params


def _new_origin() -> None:
    global _origin
    _origin = uuid.uuid4().hex[:12]


_origin = ""
"""This process's mark on its NOTIFYs: its own come back through the listener after its commit already woke
its waiters, and a second wake-up would only void what its claims learnt of their queues since."""
_new_origin()
os.register_at_fork(after_in_child=_new_origin)


def publish_here_on_commit(keys: Mapping[str, int]) -> None:
    """Wake this process's waiters on `keys` once the current transaction commits."""
    if keys:
        transaction.on_commit(lambda: hub.publish(keys))


def parse_payload(payload: str) -> dict[str, int] | None:
    """The keys of a NOTIFY from another process (None: it came from this one, see `_origin`)."""
    rest, _, origin = payload.rpartition("|")
    if origin == _origin:
        return None
    key, _, count = rest.rpartition("|")
    if key and count.isdigit():
        return {key: int(count)}
    key, _, count = payload.rpartition("|")  # without an origin: a process of an earlier release
    return {key: int(count)} if key and count.isdigit() else {payload: 1}
