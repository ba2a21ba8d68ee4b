"""The in-process poller registry: one entry per identity, newest first, forgotten after the TTL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.taskqueue.v1 import PollerInfo

from engine.matching.pollers import POLLER_TTL, MemoryPollers, QueueKey

KEY = QueueKey("ns", "tq", 1)


def poller(identity: str, ago: timedelta) -> PollerInfo:
    at = Timestamp()
    at.FromDatetime(datetime.now(UTC) - ago)
    return PollerInfo(identity=identity, last_access_time=at, rate_per_second=100_000)


def test_latest_poll_per_identity_newest_first_and_stale_ones_dropped():
    store = MemoryPollers()
    store.seen(KEY, poller("a", timedelta(seconds=30)))
    store.seen(KEY, poller("b", timedelta(seconds=10)))
    store.seen(KEY, poller("a", timedelta(seconds=1)))
    store.seen(KEY, poller("old", POLLER_TTL + timedelta(seconds=1)))
    store.seen(QueueKey("ns", "tq", 2), poller("activity-only", timedelta(0)))

    listed = asyncio.run(store.list(KEY))

    assert [p.identity for p in listed] == ["a", "b"]
    asyncio.run(store.remove(KEY, "a"))
    assert [p.identity for p in asyncio.run(store.list(KEY))] == ["b"]


def test_queues_nobody_polls_any_more_are_swept():
    store = MemoryPollers()
    store.seen(QueueKey("ns", "gone", 1), poller("old", POLLER_TTL + timedelta(seconds=1)))
    for i in range(MemoryPollers.SWEEP_EVERY):
        store.seen(KEY, poller(f"w{i % 3}", timedelta(0)))
    assert asyncio.run(store.list(QueueKey("ns", "gone", 1))) == []
    assert set(store._queues) == {KEY}


def test_without_redis_polls_go_on_and_describe_is_unavailable():
    from engine.errors import Unavailable
    from engine.matching.pollers import RedisPollers

    async def scenario() -> None:
        store = RedisPollers("redis://127.0.0.1:1/0")  # nothing listens there
        store.seen(KEY, poller("a", timedelta(0)))
        store.seen(KEY, poller("a", timedelta(0)))  # throttled: one background write per interval
        assert len(store._writes) == 1
        await asyncio.gather(*store._writes)  # the failed write is swallowed
        with pytest.raises(Unavailable, match="Redis"):
            await store.list(KEY)

    asyncio.run(scenario())
