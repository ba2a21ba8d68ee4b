"""Live hints for the console: "run changed", sent after commit to the console's websockets.

Like wake-ups (notify.py) these are hints: a lost one costs the open page freshness, never correctness,
since the page's consumer re-reads through the selectors and a reconnecting page re-reads everything.
So the write path never waits for them: on commit a run's (namespace, row id) is queued in process
memory, and a sender on its own event loop publishes the queue to the channel layer (Redis in
production, so `perdura api` and the shard workers reach `perdura web`'s sockets). A burst of commits
of one run is sent once. If Redis is down the hints are dropped, and the write path does not notice.

On Redis, hints are sent only to groups an open page watches. A page's socket registers its groups in
one sorted set (`watch`, renewed while it is open), and the sender, which gathers commits for
BATCH_DELAY before each batch, reads that set in the same pipeline that moves the namespaces' versions.
So a server under load pays one Redis round trip per batch, not a few per run changed: a group send
costs two round trips even when nobody listens, and they used to take a flooded `perdura api` a third
of its event loop's time (bench/rate_limit_isolation.py).

In `perdura dev` the channel layer is process memory, whose queues belong to the web server's event
loop: the console's consumers register that loop (`use_loop`) and the sender publishes on it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.db import transaction

if TYPE_CHECKING:
    import redis
    import redis.asyncio

log = logging.getLogger(__name__)

BATCH_DELAY = 0.05
"""Seconds the Redis sender gathers commits before a batch: at most 20 batches a second, however busy."""
WATCH_SECONDS = 60
"""How long a page's registration lasts; its socket renews it every third of that while open."""
_WATCHED_KEY = "perdura-live:watched"
_SEND_TIMEOUT = 5.0
"""Seconds one batch may take (Redis unreachable): then it is dropped and the next batch tries again."""
_CONCURRENT_SENDS = 16
RUN_CHANGED = "run.changed"
"""The message type; consumers handle it in `run_changed`."""


def namespace_group(namespace_id: uuid.UUID | str) -> str:
    """Every page that lists the namespace's runs."""
    return f"ns.{uuid.UUID(str(namespace_id)).hex}"


def run_group(namespace_id: uuid.UUID | str, execution_pk: int) -> str:
    """Every page open on one run (the namespace is in the name so test databases sharing Redis, whose row
    ids repeat, do not hear each other)."""
    return f"run.{uuid.UUID(str(namespace_id)).hex}.{execution_pk}"


_VERSION_KEY = "perdura-live:namespace-version:"
_VERSION_TTL = 7 * 24 * 3600
_memory_versions: dict[str, int] = {}
_redis_client: redis.Redis | None = None


def namespace_version(namespace_id: uuid.UUID | str) -> str | None:
    """A counter of the namespace's published hints (None when unknown). A list page shows the version it
    read before its rows, and its socket skips the first re-read when the version has not moved: the
    sender bumps it before publishing, so a change the page did not see always moves it or sends a hint."""
    key = uuid.UUID(str(namespace_id)).hex
    if settings.PERDURA_LIVE == "memory":
        return str(_memory_versions.get(key, 0))
    if settings.PERDURA_LIVE != "redis":
        return None
    global _redis_client
    try:
        import redis

        if _redis_client is None:
            _redis_client = redis.Redis.from_url(settings.PERDURA_REDIS_URL, socket_timeout=1)
        # The client is made without decode_responses: Redis answers bytes.
        value = cast(bytes | None, _redis_client.get(_VERSION_KEY + key))
    except Exception:  # Redis away: the socket re-reads, as without versions
        return None
    return value.decode() if value else "0"


class _Sender:
    """Publishes queued hints from a daemon thread's loop (or the registered web loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[tuple[str, int]] = set()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._web_loop: asyncio.AbstractEventLoop | None = None
        self._redis: redis.asyncio.Redis | None = None

    def use_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Publish on `loop` from now on (the web server's, for the in-memory layer)."""
        self._web_loop = loop

    def _target(self) -> asyncio.AbstractEventLoop | None:
        if settings.PERDURA_LIVE == "memory":
            # Only this process's web server has sockets to reach; none yet means nobody is listening.
            return self._web_loop
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="perdura-live", daemon=True).start()
            self._loop = loop
        return self._loop

    def send(self, namespace_id: uuid.UUID | str, execution_pk: int) -> None:
        if settings.PERDURA_LIVE == "off":
            return
        with self._lock:
            if settings.PERDURA_LIVE == "memory":
                key = uuid.UUID(str(namespace_id)).hex
                _memory_versions[key] = _memory_versions.get(key, 0) + 1
            self._pending.add((str(namespace_id), execution_pk))
            if self._scheduled:
                return
            loop = self._target()
            if loop is None or loop.is_closed():
                self._pending.clear()
                return
            self._scheduled = True
        delay = BATCH_DELAY if settings.PERDURA_LIVE == "redis" else 0.0
        loop.call_soon_threadsafe(lambda: loop.call_later(delay, lambda: loop.create_task(self._flush())))

    async def _flush(self) -> None:
        from channels.layers import get_channel_layer

        with self._lock:
            batch, self._pending, self._scheduled = self._pending, set(), False
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            await asyncio.wait_for(self._publish(layer, batch), timeout=_SEND_TIMEOUT)
        except Exception:  # a hint: never worth more than a log line
            log.warning("console live hints dropped", exc_info=True)

    async def _bump_versions(self, namespaces: set[str]) -> set[str]:
        """Move the namespaces' versions, and answer the groups open pages watch (Redis only)."""
        import redis.asyncio

        if self._redis is None:
            self._redis = redis.asyncio.Redis.from_url(settings.PERDURA_REDIS_URL, socket_timeout=5)
        async with self._redis.pipeline(transaction=False) as pipe:
            for namespace_id in namespaces:
                key = _VERSION_KEY + uuid.UUID(namespace_id).hex
                pipe.incr(key)
                pipe.expire(key, _VERSION_TTL)
            pipe.zrangebyscore(_WATCHED_KEY, time.time(), "+inf")
            answers = await pipe.execute()
        return {group.decode() for group in answers[-1]}

    async def _publish(self, layer: Any, batch: set[tuple[str, int]]) -> None:
        sends: list[tuple[str, dict]] = []
        namespaces: set[str] = set()
        for namespace_id, pk in batch:
            message = {"type": RUN_CHANGED, "run": pk}
            sends.append((run_group(namespace_id, pk), message))
            if namespace_id not in namespaces:  # one hint per namespace and batch: the list re-reads all
                namespaces.add(namespace_id)
                sends.append((namespace_group(namespace_id), message))
        if settings.PERDURA_LIVE == "redis":
            watched = await self._bump_versions(namespaces)
            sends = [(group, message) for group, message in sends if group in watched]
        # A few at once (each is a few Redis round trips), never one connection per hint.
        for start in range(0, len(sends), _CONCURRENT_SENDS):
            chunk = sends[start : start + _CONCURRENT_SENDS]
            await asyncio.gather(*(layer.group_send(group, message) for group, message in chunk))


sender = _Sender()


async def watch(groups: list[str]) -> None:
    """Register an open page's groups for WATCH_SECONDS: the Redis sender sends only to watched groups.

    A page registers after joining its groups and before it checks whether it is current, so a change
    either moves the version it checks or finds the registration and sends the hint."""
    if settings.PERDURA_LIVE != "redis" or not groups:
        return
    import redis.asyncio

    now = time.time()
    client = redis.asyncio.Redis.from_url(settings.PERDURA_REDIS_URL, socket_timeout=5)
    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.zadd(_WATCHED_KEY, dict.fromkeys(groups, now + WATCH_SECONDS))
            pipe.zremrangebyscore(_WATCHED_KEY, "-inf", now)  # other pages', long closed
            await pipe.execute()
    finally:
        await client.aclose()


def run_changed_on_commit(*, namespace_id: uuid.UUID | str, execution_pk: int) -> None:
    """Tell the console's open pages, once the current transaction commits, that the run changed."""
    transaction.on_commit(lambda: sender.send(namespace_id, execution_pk))
