"""The console's live hints (engine/live.py) on a real Redis channel layer: they reach a listener of the
run's and the namespace's groups from another thread, an idle listener survives Redis's read timeout, and
an unreachable Redis costs the writer nothing. On Redis only groups an open page watches are sent to."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import pytest
from channels.layers import channel_layers
from django.test import override_settings
from perdura import settings as production_settings

from engine import live
from tests.support import servers


def _layer_settings(url: str) -> dict:
    """Production's channel layer settings (the test process's own are in memory), on `url`."""
    config = dict(production_settings.CHANNEL_LAYERS["default"])
    assert config["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    config["CONFIG"] = dict(config["CONFIG"], hosts=[dict(config["CONFIG"]["hosts"][0], address=url)])
    config["CONFIG"]["prefix"] = f"perdura-live-test-{uuid.uuid4().hex[:6]}"
    return {"default": config}


def _on_redis(url: str):
    """Settings for hints on the Redis at `url` (the layer's and the namespace versions')."""
    live._redis_client = None  # made on first use, for the URL of the time
    return override_settings(PERDURA_LIVE="redis", PERDURA_REDIS_URL=url, CHANNEL_LAYERS=_layer_settings(url))


@pytest.fixture
def redis_layer():
    with _on_redis(servers.REDIS_URL):
        channel_layers.backends.clear()
        yield channel_layers.make_backend("default")
    channel_layers.backends.clear()
    live._redis_client = None


async def test_hints_reach_the_run_and_namespace_groups(redis_layer):
    sender = live._Sender()
    namespace_id = uuid.uuid4()
    run_listener = await redis_layer.new_channel()
    list_listener = await redis_layer.new_channel()
    await redis_layer.group_add(live.run_group(namespace_id, 7), run_listener)
    await redis_layer.group_add(live.namespace_group(namespace_id), list_listener)
    await redis_layer.group_add(live.run_group(uuid.uuid4(), 7), await redis_layer.new_channel())
    await live.watch([live.run_group(namespace_id, 7), live.namespace_group(namespace_id)])

    await asyncio.to_thread(sender.send, namespace_id, 7)  # from a thread, as the write path's
    assert await asyncio.wait_for(redis_layer.receive(run_listener), 5) == {"type": "run.changed", "run": 7}
    assert await asyncio.wait_for(redis_layer.receive(list_listener), 5) == {"type": "run.changed", "run": 7}
    # Another namespace's run with the same row id (test databases share Redis) is another group.
    await asyncio.to_thread(sender.send, namespace_id, 8)
    assert await asyncio.wait_for(redis_layer.receive(list_listener), 5) == {"type": "run.changed", "run": 8}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(redis_layer.receive(run_listener), 0.5)


async def test_an_idle_listener_outlasts_redis_read_timeouts(redis_layer):
    """A console page with nothing happening waits in the layer's blocking reads (5 s each); redis-py's
    default socket timeout is also 5 s, which killed every idle socket before the 15 s setting."""
    listener = await redis_layer.new_channel()
    with pytest.raises(TimeoutError):  # asyncio's: nothing arrived, and nothing failed
        await asyncio.wait_for(redis_layer.receive(listener), 6.5)


def test_unreachable_redis_costs_the_writer_nothing(caplog):
    closed = f"redis://127.0.0.1:{servers.free_port()}/0"
    with _on_redis(closed):
        channel_layers.backends.clear()
        sender = live._Sender()
        caplog.set_level(logging.WARNING, logger="engine.live")
        started = time.monotonic()
        for pk in range(100):
            sender.send(uuid.uuid4(), pk)
        assert time.monotonic() - started < 0.5
        deadline = time.monotonic() + 10
        while "console live hints dropped" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "console live hints dropped" in caplog.text
    channel_layers.backends.clear()


def test_namespace_versions_move_before_hints():
    """A list page skips its first re-read when the namespace's version has not moved since it read its
    rows, so every change must move it: in `perdura dev` also before any socket registered its loop
    (hints then go nowhere), and on Redis before the hint is published."""
    namespace_id = uuid.uuid4()
    with override_settings(PERDURA_LIVE="memory"):
        sender = live._Sender()
        assert live.namespace_version(namespace_id) == "0"
        sender.send(namespace_id, 1)
        assert live.namespace_version(namespace_id) == "1"
    with override_settings(PERDURA_LIVE="off"):
        assert live.namespace_version(namespace_id) is None


async def test_redis_namespace_version_moves_with_the_hint(redis_layer):
    sender = live._Sender()
    namespace_id = uuid.uuid4()
    listener = await redis_layer.new_channel()
    await redis_layer.group_add(live.namespace_group(namespace_id), listener)
    await live.watch([live.namespace_group(namespace_id)])
    before = await asyncio.to_thread(live.namespace_version, namespace_id)
    await asyncio.to_thread(sender.send, namespace_id, 3)
    await asyncio.wait_for(redis_layer.receive(listener), 5)
    after = await asyncio.to_thread(live.namespace_version, namespace_id)
    assert (before, after) == ("0", "1")


async def test_only_watched_groups_are_sent_to_and_versions_move_regardless(redis_layer):
    """A group no open page watches gets no hint (a group send costs Redis round trips even when nobody
    listens, which a busy server paid for every run it changed), while the namespace's version still moves,
    so a list page that reads it before its socket registers cannot miss a change."""
    sender = live._Sender()
    watched, unwatched = uuid.uuid4(), uuid.uuid4()
    watched_listener = await redis_layer.new_channel()
    unwatched_listener = await redis_layer.new_channel()
    await redis_layer.group_add(live.namespace_group(watched), watched_listener)
    await redis_layer.group_add(live.namespace_group(unwatched), unwatched_listener)
    await live.watch([live.namespace_group(watched)])

    for pk in range(20):  # a burst: gathered into one batch or a few
        await asyncio.to_thread(sender.send, unwatched, pk)
    await asyncio.to_thread(sender.send, watched, 99)
    assert await asyncio.wait_for(redis_layer.receive(watched_listener), 5) == {
        "type": "run.changed",
        "run": 99,
    }
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(redis_layer.receive(unwatched_listener), 0.5)
    assert await asyncio.to_thread(live.namespace_version, unwatched) not in (None, "0")

    # A registration lapses: once it has, the group is not sent to any more.
    live_seconds, live.WATCH_SECONDS = live.WATCH_SECONDS, 0.2
    try:
        await live.watch([live.namespace_group(unwatched)])
        await asyncio.to_thread(sender.send, unwatched, 100)
        assert (await asyncio.wait_for(redis_layer.receive(unwatched_listener), 5))["run"] == 100
        await asyncio.sleep(0.3)
        await asyncio.to_thread(sender.send, unwatched, 101)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(redis_layer.receive(unwatched_listener), 0.5)
    finally:
        live.WATCH_SECONDS = live_seconds
