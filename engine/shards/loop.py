"""In-process shard processing for `perdura dev`: fire timers exactly when due, sweep as a safety net."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from perdura import clock

from engine import notify
from engine.api import dbthreads
from engine.shards import timers
from engine.shards.wakeups import SWEEP_SECONDS

log = logging.getLogger("perdura.shards")


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_due(owner: str) -> int:
    return sum(timers.process_shard(shard, owner) for shard in timers.due_shards())


async def run_timer_loop(stop: asyncio.Event) -> None:
    """Until `stop` is set: fire due timers, then sleep until the next one (or a new one) is due."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    notify.hub.subscribe(lambda counts: notify.TIMERS_KEY in counts and loop.call_soon_threadsafe(wake.set))
    owner = owner_name()
    while not stop.is_set():
        wake.clear()
        try:
            await dbthreads.run(_process_due, owner)
            first = await dbthreads.run(timers.next_fire_at)
        except Exception:
            log.exception("timer processing failed; retrying shortly")
            first = None
        delay = (
            SWEEP_SECONDS
            if first is None
            else min(max((first - clock.now()).total_seconds(), 0.0), SWEEP_SECONDS)
        )
        waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())]
        await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
