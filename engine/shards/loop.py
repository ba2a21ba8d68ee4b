"""In-process shard processing for `perdura dev`: fire timers exactly when due, sweep as a safety net."""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from perdura import clock

from engine import dbthreads, notify
from engine.persistence.wakeups import SWEEP_SECONDS
from engine.shards import budget, namespace_purge, timers
from engine.shards.failure_log import FailureLog

log = logging.getLogger("perdura.shards")
failure_log = FailureLog(log)


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


PURGE_SECONDS = 5.0
"""How often the loop looks for deleted namespaces whose runs are still there (as beat does)."""

DEV_PASS_SECONDS = 0.3
"""A pass over one shard in `perdura dev` holds its only database thread, which serves the API too."""


def _process_one(shard: int, owner: str) -> int:
    # A lease held elsewhere (None) counts as nothing done; the loop's next pass tries again.
    return timers.process_shard(shard, owner, budget=budget.Budget(DEV_PASS_SECONDS)) or 0


async def _process_due(owner: str) -> int:
    """One pass over every shard with work due, each in its own turn on the database thread (so API
    calls interleave). A shard that fails (an outage: its rows fail on their own and are charged for
    it) is logged and skipped; the shards after it still get their pass."""
    done = 0
    for shard in await dbthreads.run(timers.due_shards):
        if budget.stop_requested.is_set():
            break
        try:
            done += await dbthreads.run(_process_one, shard, owner)
        except Exception as e:  # noqa: BLE001 - one shard never stops the others
            failure_log.failed(f"shard:{shard}", f"processing shard {shard} failed; retrying shortly", e)
    return done


async def run_timer_loop(stop: asyncio.Event) -> None:
    """Until `stop` is set: fire due timers, then sleep until the next one (or a new one) is due."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    notify.hub.subscribe(lambda counts: notify.TIMERS_KEY in counts and loop.call_soon_threadsafe(wake.set))
    owner = owner_name()
    purge_at = 0.0
    while not stop.is_set():
        wake.clear()
        try:
            if loop.time() >= purge_at:
                purge_at = loop.time() + PURGE_SECONDS
                await dbthreads.run(namespace_purge.purge_pass)
            await _process_due(owner)
            first = await dbthreads.run(timers.next_fire_at)
        except Exception as e:  # noqa: BLE001 - nothing stops the loop but `stop`
            failure_log.failed("timer-loop", "timer processing failed; retrying shortly", e)
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
