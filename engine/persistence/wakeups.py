"""Which new shard rows deserve a wake-up hint, and when (the rows themselves are the truth, rule 3).

In `perdura dev` the in-process timer loop hears about new timers through the notify hub. With
Celery shard workers, each new timer also sends a ShardDue hint with its fire time; a lost hint
only delays the timer until the beat sweep finds the row.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

from engine import notify
from engine.history.mutation import NewTimer, TimerKind

SWEEP_SECONDS = 1.0
"""How long perdura dev's timer loop sleeps at most between sweeps."""


# Timers that must fire on time (a workflow sleeping 2 s expects 2 s). Timeouts only guard against
# lost workers: the periodic sweep (within PERDURA_SWEEP_SECONDS) is precise enough for them, and
# skipping their hints spares a wake-up for every task started.
PRECISE = frozenset({TimerKind.USER_TIMER, TimerKind.WORKFLOW_RUN_TIMEOUT, TimerKind.WORKFLOW_BACKOFF})


def ahead() -> timedelta:
    """How far ahead of its time a timer's wake-up may be sent: two sweeps. A timer due later is hinted by
    the sweep that finds it this close (engine/tasks.py), not when it is created: Celery holds a message
    with an ETA unacknowledged, Redis redelivers it after the visibility timeout (5 minutes), and a worker
    would hold one more copy of a day-long timer's wake-up every five minutes, of a century-long run
    timeout's for ever."""
    return timedelta(seconds=2 * settings.PERDURA_SWEEP_SECONDS)


def first_hint(now: datetime, timers: list[NewTimer], horizon: timedelta) -> datetime | None:
    """When the earliest of `timers` that must fire on time is due, if that is within `horizon`."""
    due = [t.fire_at for t in timers if t.kind in PRECISE and t.fire_at - now <= horizon]
    return min(due, default=None)


def timers_created(shard: int, now: datetime, timers: list[NewTimer], keys: dict[str, int]) -> None:
    """Hint the timer processors about new timers that need a wake-up before their next sweep."""
    if not notify.shard_workers_listen():
        # perdura dev: its timer loop sleeps at most a second; wake it for anything due sooner.
        if any((t.fire_at - now).total_seconds() < SWEEP_SECONDS for t in timers):
            keys[notify.TIMERS_KEY] = 1
        return
    at = first_hint(now, timers, ahead())
    if at is not None:
        notify.shard_due_on_commit(notify.ShardDue(shard, at))


def transfers_created(shard: int, keys: dict[str, int]) -> None:
    """Transfers are due at once: wake the in-process loop, or hint the shard's worker."""
    if not notify.shard_workers_listen():
        keys[notify.TIMERS_KEY] = 1
        return
    notify.shard_due_on_commit(notify.ShardDue(shard))


def schedule_due(shard: int, at: datetime) -> None:
    """Inside the transaction that set a schedule row's wake-up to `at`: hint the shard's owner."""
    if not notify.shard_workers_listen():
        notify.publish_on_commit({notify.TIMERS_KEY: 1})
        return
    notify.shard_due_on_commit(notify.ShardDue(shard, at))
