"""Which new shard rows deserve a wake-up hint, and when (the rows themselves are the truth, rule 3).

In `perdura dev` the in-process timer loop hears about new timers through the notify hub. With
Celery shard workers, each new timer also sends a ShardDue hint with its fire time; a lost hint
only delays the timer until the beat sweep finds the row.
"""

from __future__ import annotations

from datetime import datetime

from engine import notify
from engine.history.mutation import NewTimer, TimerKind

SWEEP_SECONDS = 1.0
"""How long perdura dev's timer loop sleeps at most between sweeps."""


# Timers that must fire on time (a workflow sleeping 2 s expects 2 s). Timeouts only guard against
# lost workers: the periodic sweep (within PERDURA_SWEEP_SECONDS) is precise enough for them, and
# skipping their hints spares a wake-up for every task started.
_PRECISE = {TimerKind.USER_TIMER, TimerKind.WORKFLOW_RUN_TIMEOUT, TimerKind.WORKFLOW_BACKOFF}


def timers_created(shard: int, now: datetime, timers: list[NewTimer], keys: dict[str, int]) -> None:
    """Hint the timer processors about new timers that need a wake-up before their next sweep."""
    if not notify.shard_workers_listen():
        # perdura dev: its timer loop sleeps at most a second; wake it for anything due sooner.
        if any((t.fire_at - now).total_seconds() < SWEEP_SECONDS for t in timers):
            keys[notify.TIMERS_KEY] = 1
        return
    precise = [t.fire_at for t in timers if t.kind in _PRECISE]
    if precise:
        notify.shard_due_on_commit(notify.ShardDue(shard, min(precise)))


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
