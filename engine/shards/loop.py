"""In-process shard processing for `perdura dev`: fire timers exactly when due, sweep as a safety net."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from datetime import datetime

from django.conf import settings
from perdura import clock

from engine import dbthreads, notify
from engine.persistence import leases
from engine.persistence.wakeups import SWEEP_SECONDS
from engine.shards import budget, namespace_purge, next_due, timers
from engine.shards.failure_log import FailureLog

log = logging.getLogger("perdura.shards")
failure_log = FailureLog(log)


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def dev_owner_name() -> str:
    """The name `perdura dev`'s loop holds its leases under: the same from one start to the next, so that a
    server started again after a crash takes its shards back at once instead of when their leases expire."""
    return f"{socket.gethostname()}:perdura-dev"


PURGE_SECONDS = 5.0
"""How often the loop looks for deleted namespaces whose runs are still there (as beat does)."""

DEV_PASS_SECONDS = 0.3
"""A pass over one shard in `perdura dev` holds its only database thread, which serves the API too."""


class HeldLeases:
    """The leases of `shards` that a loop holds from one pass to the next, renewed a third of the way
    through their time. Taking and releasing one per pass cost two commits for every shard with work; the
    fence is the same (every write checks the range_id held)."""

    def __init__(self, owner: str, shards: range) -> None:
        self.owner = owner
        self.shards = shards
        self.held: dict[int, int] = {}
        self._renew_at = 0.0

    def refresh(self, now: float) -> None:
        """On a database thread: renew the leases held if a third of their time has gone by, and try again
        for those not held (never taken, lost, or held by another owner whose lease may have expired)."""
        ttl = settings.PERDURA_SHARD_LEASE_SECONDS
        if now < self._renew_at and len(self.held) == len(self.shards):
            return
        self.held = leases.renew(self.owner, self.held, ttl)
        for shard in self.shards:
            if shard not in self.held:
                range_id = leases.acquire(shard, self.owner, ttl)
                if range_id is not None:
                    self.held[shard] = range_id
        self._renew_at = now + ttl / 3

    def lost(self, shard: int) -> None:
        self.held.pop(shard, None)
        self._renew_at = 0.0

    def release_all(self) -> None:
        for shard, range_id in sorted(self.held.items()):
            leases.release(shard, range_id)
        self.held.clear()


def _cycle(held: HeldLeases, loop_time: float) -> tuple[bool, datetime | None]:
    """On the database thread, in one turn: renew the leases if due, find the held shards with work due,
    and pass over them within DEV_PASS_SECONDS in all (the thread serves the API too; the shards left
    get the next turn). Returns whether to look again at once (rows were done, or shards left for the next
    turn), and when the next shard not yet due is due. In one turn,
    not one per step: each hand-over to the thread waited for the API call in hand and for the event
    loop, a few milliseconds a timer."""
    held.refresh(loop_time)
    due_now, later = next_due.plan(sorted(held.held), clock.now())
    pass_budget = budget.Budget(DEV_PASS_SECONDS)
    done = 0
    for shard in due_now:
        range_id = held.held.get(shard)
        if range_id is None:
            continue
        if pass_budget.spent():
            return True, later
        try:
            done += timers.process_held(shard, range_id, budget=pass_budget)
        except leases.LeaseLost:
            held.lost(shard)
        except Exception as e:  # noqa: BLE001 - one shard never stops the others
            failure_log.failed(f"shard:{shard}", f"processing shard {shard} failed; retrying shortly", e)
    return done > 0, later


async def run_timer_loop(stop: asyncio.Event) -> None:
    """Until `stop` is set: pass over the shards with work due, then sleep until the next is due (or a
    wake-up says new work is)."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    notify.hub.subscribe(lambda counts: notify.TIMERS_KEY in counts and loop.call_soon_threadsafe(wake.set))
    held = HeldLeases(dev_owner_name(), range(settings.PERDURA_SHARDS))
    purge_at = 0.0
    while not stop.is_set():
        wake.clear()
        later = None
        try:
            if loop.time() >= purge_at:
                purge_at = loop.time() + PURGE_SECONDS
                await dbthreads.run(namespace_purge.purge_pass)
            again, later = await dbthreads.run_urgent(_cycle, held, loop.time())
            if again:
                continue  # more may have come due during the passes
        except Exception as e:  # noqa: BLE001 - nothing stops the loop but `stop`
            failure_log.failed("timer-loop", "timer processing failed; retrying shortly", e)
        # Shards with rows due that their passes left (failing, or paced) wait for a wake-up or the sweep.
        delay = SWEEP_SECONDS if later is None else min((later - clock.now()).total_seconds(), SWEEP_SECONDS)
        waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())]
        await asyncio.wait(waiters, timeout=max(delay, 0.0), return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
    try:
        await dbthreads.run_urgent(held.release_all)
    except Exception as e:  # noqa: BLE001 - the leases expire on their own
        failure_log.failed("timer-loop", "could not release the shard leases; they expire on their own", e)
