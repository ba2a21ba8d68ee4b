"""Who polls a task queue: ephemeral poller records for DescribeTaskQueue (Temporal's pollerHistory).

Like Temporal's matching service, Perdura keeps no durable record of pollers: each poll notes its
worker's identity under (namespace, task queue, type), and an entry unseen for POLLER_TTL is dropped.
`perdura dev` keeps them in process memory. In production every `perdura api` replica writes them to
Redis (a hash per namespace/queue/type, with a TTL) so a describe served by any replica sees the
pollers of all; a replica writes a given poller at most once every WRITE_INTERVAL, which keeps the
poll path to a dictionary lookup almost always (the reported last access time lags by up to that much).
A lost or failed write only makes a poller show up later: polling never fails because of it.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from django.conf import settings
from perdura import clock
from temporalio.api.taskqueue.v1 import PollerInfo

from engine.errors import Unavailable

if TYPE_CHECKING:
    import redis.asyncio

log = logging.getLogger("perdura.api")

POLLER_TTL = timedelta(minutes=5)
"""How long a poller is listed after its last poll (Temporal's matching.PollerHistoryTTL)."""
WRITE_INTERVAL = 5.0
"""Seconds between two writes of the same poller by one replica (Redis)."""
DEFAULT_RATE_PER_SECOND = 100_000.0
"""What a poller that set no rate limit reports (Temporal's defaultTaskDispatchRPS)."""


@dataclass(frozen=True, slots=True)
class QueueKey:
    """One task queue of one type (temporal.api.enums.v1.TaskQueueType) in a namespace."""

    namespace_id: str
    task_queue: str
    queue_type: int


class PollerStore(abc.ABC):
    """Where poller records live. Implementations must be safe to call from the server's event loop."""

    @abc.abstractmethod
    def seen(self, key: QueueKey, poller: PollerInfo) -> None:
        """Note that `poller` (identity, access time, rate, capabilities) polls `key`; returns at once.

        Called on the event loop by every poll, so it must not wait on I/O.
        """

    @abc.abstractmethod
    async def remove(self, key: QueueKey, identity: str) -> None:
        """Forget a poller at once (its worker shut down)."""

    @abc.abstractmethod
    async def list(self, key: QueueKey) -> list[PollerInfo]:
        """The pollers seen on `key` within POLLER_TTL, most recent first.

        Raises:
            Unavailable: the store cannot be read.
        """


def _fresh(pollers: Iterable[PollerInfo], now: datetime) -> list[PollerInfo]:
    since = now - POLLER_TTL
    alive = [p for p in pollers if p.last_access_time.ToDatetime(tzinfo=now.tzinfo) >= since]
    return sorted(alive, key=lambda p: (p.last_access_time.seconds, p.last_access_time.nanos), reverse=True)


class MemoryPollers(PollerStore):
    """One process (`perdura dev`): a dictionary, written on every poll."""

    SWEEP_EVERY = 1000
    """Polls between two sweeps of queues nobody polls any more (so memory follows the live queues)."""

    def __init__(self) -> None:
        self._queues: dict[QueueKey, dict[str, PollerInfo]] = {}
        self._until_sweep = self.SWEEP_EVERY

    def seen(self, key: QueueKey, poller: PollerInfo) -> None:
        self._queues.setdefault(key, {})[poller.identity] = poller
        self._until_sweep -= 1
        if self._until_sweep <= 0:
            self._until_sweep = self.SWEEP_EVERY
            now = clock.now()
            swept = {k: {p.identity: p for p in _fresh(v.values(), now)} for k, v in self._queues.items()}
            self._queues = {k: v for k, v in swept.items() if v}

    async def remove(self, key: QueueKey, identity: str) -> None:
        self._queues.get(key, {}).pop(identity, None)

    async def list(self, key: QueueKey) -> list[PollerInfo]:
        pollers = self._queues.get(key)
        if not pollers:
            return []
        alive = _fresh(pollers.values(), clock.now())
        if len(alive) < len(pollers):
            self._queues[key] = {p.identity: p for p in alive}
        return alive


class RedisPollers(PollerStore):
    """Every replica (production): a Redis hash per queue, identity -> serialized PollerInfo, with a TTL."""

    PREFIX = "perdura:pollers"

    def __init__(self, url: str) -> None:
        self._url = url
        self._client: redis.asyncio.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._written: dict[tuple[QueueKey, str], float] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self._warned = -60.0

    def _redis(self) -> redis.asyncio.Redis:
        import redis.asyncio

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = redis.asyncio.Redis.from_url(self._url, socket_timeout=2.0)
            self._loop = loop
        return self._client

    def _key(self, key: QueueKey) -> str:
        return f"{self.PREFIX}:{key.namespace_id}:{key.queue_type}:{key.task_queue}"

    def seen(self, key: QueueKey, poller: PollerInfo) -> None:
        now = time.monotonic()
        last = self._written.get((key, poller.identity))
        if last is not None and now - last < WRITE_INTERVAL:
            return
        self._written[(key, poller.identity)] = now
        if len(self._written) > 10_000:
            horizon = now - POLLER_TTL.total_seconds()
            self._written = {k: t for k, t in self._written.items() if t >= horizon}
        # Written in the background: the poll does not wait for Redis.
        task = asyncio.get_running_loop().create_task(self._write(key, poller))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: QueueKey, poller: PollerInfo) -> None:
        name = self._key(key)
        try:
            async with self._redis().pipeline(transaction=False) as pipe:
                pipe.hset(name, poller.identity, poller.SerializeToString())
                pipe.expire(name, int(POLLER_TTL.total_seconds()))
                await pipe.execute()
        except Exception:  # a hint only: this poller is written again after WRITE_INTERVAL
            now = time.monotonic()
            if now - self._warned >= 60.0:  # one line a minute while Redis is away, not one per poll
                self._warned = now
                log.warning("could not record a poller in Redis", exc_info=True)

    async def remove(self, key: QueueKey, identity: str) -> None:
        self._written.pop((key, identity), None)
        try:
            await self._redis().hdel(self._key(key), identity)
        except Exception:
            log.warning("could not remove a poller from Redis", exc_info=True)

    async def list(self, key: QueueKey) -> list[PollerInfo]:
        name = self._key(key)
        try:
            raw = await self._redis().hgetall(name)
        except Exception as error:
            raise Unavailable(f"the poller registry (Redis) cannot be read: {error}") from None
        # The client is made without decode_responses: Redis answers bytes.
        pollers = [PollerInfo.FromString(cast(bytes, value)) for value in raw.values()]
        alive = _fresh(pollers, clock.now())
        stale = {p.identity for p in pollers} - {p.identity for p in alive}
        if stale:
            try:
                await self._redis().hdel(name, *stale)
            except Exception:
                log.debug("could not prune stale pollers", exc_info=True)
        return alive


_store: PollerStore | None = None


def store() -> PollerStore:
    """The configured store (settings.PERDURA_POLLERS: "memory" or "redis"), made on first use."""
    global _store
    if _store is None:
        _store = (
            RedisPollers(settings.PERDURA_REDIS_URL)
            if settings.PERDURA_POLLERS == "redis"
            else MemoryPollers()
        )
    return _store
