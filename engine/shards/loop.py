"""A shard loop: it holds its share of the shards (engine/shards/ownership.py) and passes over each when work
comes due in it, timers first, to the millisecond. `perdura dev` runs one in its process; each `perdura
worker` runs one beside its Celery worker, woken by the NOTIFYs of the API's commits."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.conf import settings
from perdura import clock

from engine import dbthreads, notify
from engine.persistence import leases
from engine.persistence.wakeups import SWEEP_SECONDS
from engine.shards import budget, namespace_purge, next_due, ownership, timers, visibility_index
from engine.shards.failure_log import FailureLog

log = logging.getLogger("perdura.shards")
failure_log = FailureLog(log)


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def dev_owner_name() -> str:
    """The name `perdura dev`'s loop holds its leases under: the same from one start to the next, so that a
    server started again after a crash takes its shards back at once instead of when their leases expire."""
    return f"{socket.gethostname()}:perdura-dev"


def worker_owner_name() -> str:
    """The name a `perdura worker`'s shard loop holds its leases under: its supervisor's, so that a loop
    the supervisor starts again after a crash takes its shards back at once."""
    return f"{socket.gethostname()}:{os.getppid()}:worker"


Upcoming = list[tuple[datetime, int]]
"""When each held shard not yet due is next due (shard), earliest first."""

PURGE_SECONDS = 5.0
"""How often the loop looks for deleted namespaces whose runs are still there (as beat does)."""

WORKER_EARLY_SECONDS = 0.003
"""How long before a shard is due a worker's loop wakes: about what waking (the event loop's sleep ends on a
whole millisecond), the hand-over to its thread and the read of the due timers take on a busy machine."""

TURN_SECONDS = 0.3
"""How long a loop's turn on a database thread may last: `perdura dev`'s only one serves the API too, and
a worker's loop looks again for shards come due after each turn."""


def _cycle(held: ownership.Ownership, loop_time: float, expected: Upcoming) -> tuple[bool, Upcoming]:
    """On the database thread, in one turn: pass over the shards `expected` to be due by now or in a few
    milliseconds (the loop slept until then; a pass waits for the time), then renew the leases if it is
    time, find the held shards with work due and pass over them, within TURN_SECONDS in all (`perdura
    dev`'s thread serves the API too; the shards left get the next turn). Returns whether to look again at once (rows were done after the plan, or shards
    left for the next turn), and when each held shard not yet due is due.

    One turn, not one per step: each hand-over to the thread waited for the API call in hand and for the
    event loop, a few milliseconds a timer. And a shard the loop slept for is passed over before anything
    is asked: asking first cost its timers the few milliseconds the asking takes."""
    pass_budget = budget.Budget(TURN_SECONDS)
    done = 0

    def pass_over(shards: Iterable[tuple[datetime | None, int]]) -> bool:
        nonlocal done
        for due_by, shard in shards:
            range_id = held.held.get(shard)
            if range_id is None:
                continue
            if pass_budget.spent():
                return False
            try:
                done += timers.process_held(shard, range_id, budget=pass_budget, due_by=due_by)
            except leases.LeaseLost:
                held.lost(shard)
            except Exception as e:  # noqa: BLE001 - one shard never stops the others
                failure_log.failed(f"shard:{shard}", f"processing shard {shard} failed; retrying shortly", e)
        return True

    if not pass_over(expected):
        return True, []
    held.refresh(loop_time)
    due_now, upcoming = next_due.plan(sorted(held.held), clock.now())
    # The plan was made after the expected shards' passes: only rows done after it (work that came due
    # meanwhile) call for another look before sleeping until `upcoming`.
    done = 0
    if not pass_over((None, shard) for shard in due_now):
        return True, upcoming
    return done > 0, upcoming


async def run_timer_loop(stop: asyncio.Event, *, owner: str, purge: bool, early: float = 0.0) -> None:
    """Until `stop` is set: pass over the shards `owner` holds that have work due, then sleep until the
    next is due, or a wake-up says one of them has new work. `purge`: also look for deleted namespaces'
    runs now and then (`perdura dev`; beat does it in production). `early`: wake this many seconds before
    a shard is due, read its due timers and wait for the time on the loop's own thread (a worker's loops;
    `perdura dev`'s one thread serves the API too)."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    held = ownership.Ownership(owner, range(settings.PERDURA_SHARDS))

    def heard(counts: Mapping[str, int]) -> None:
        if any(notify.shard_of(key) in held.held for key in counts):
            loop.call_soon_threadsafe(wake.set)

    notify.hub.subscribe(heard)
    purge_at = 0.0 if purge else math.inf
    holds = -1
    upcoming: Upcoming = []
    while not stop.is_set():
        wake.clear()
        now = clock.now()
        expected = [(at, shard) for at, shard in upcoming if at <= now + timedelta(seconds=early)]
        upcoming = []
        try:
            if loop.time() >= purge_at:
                purge_at = loop.time() + PURGE_SECONDS
                await dbthreads.run(namespace_purge.purge_pass)
            again, upcoming = await dbthreads.run_urgent(_cycle, held, loop.time(), expected)
            if len(held.held) != holds:
                holds = len(held.held)
                log.info("shard loop %s holds %d of %d shards", owner, holds, len(held.shards))
            if again:
                continue  # more may have come due during the passes
        except Exception as e:  # noqa: BLE001 - nothing stops the loop but `stop`
            failure_log.failed("timer-loop", "timer processing failed; retrying shortly", e)
        # Shards with rows due that their passes left (failing, or paced) wait for a wake-up or the sweep.
        delay = (
            SWEEP_SECONDS
            if not upcoming
            else min((upcoming[0][0] - clock.now()).total_seconds() - early, SWEEP_SECONDS)
        )
        if not visibility_index.backoff.ready():
            # Visibility rows a pass left wait out OpenSearch's backoff (timers.py): look again when it ends.
            delay = min(delay, visibility_index.backoff.seconds_left())
        waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())]
        await asyncio.wait(waiters, timeout=max(delay, 0.0), return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
    try:
        await dbthreads.run_urgent(held.release_all)
    except Exception as e:  # noqa: BLE001 - the leases expire on their own
        failure_log.failed("timer-loop", "could not release the shard leases; they expire on their own", e)
