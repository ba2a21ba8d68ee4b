"""Firing due timer rows of a shard: each fire is one fenced transaction on the run it belongs to."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Min
from perdura import clock

from engine.history import activity, lifecycle, timer, workflow_task
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TimerKind
from engine.models import Timer
from engine.persistence import store
from engine.services import schedules
from engine.shards import leases, transfers

log = logging.getLogger(__name__)
BATCH = 200


def _apply(m: Mutation, row: Timer) -> None:
    kind = row.kind
    if kind == TimerKind.USER_TIMER:
        timer.fire(m, started_event_id=row.event_id)
    elif kind == TimerKind.WORKFLOW_TASK_TIMEOUT:
        workflow_task.time_out(m, scheduled_event_id=row.event_id, attempt=row.attempt)
    elif kind == TimerKind.ACTIVITY_TIMEOUT:
        activity.time_out(m, scheduled_event_id=row.event_id, attempt=row.attempt, timeout_type=row.detail)
    elif kind == TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START:
        workflow_task.schedule_to_start_timeout(m, scheduled_event_id=row.event_id, attempt=row.attempt)
    elif kind == TimerKind.WORKFLOW_BACKOFF:
        lifecycle.backoff_elapsed(m)
    elif kind == TimerKind.WORKFLOW_RUN_TIMEOUT:
        lifecycle.run_timeout(m)
    else:
        raise StaleTask(f"unknown timer kind {kind}")


def fire(row: Timer, *, shard: int, range_id: int) -> bool:
    """Apply one due timer under the shard's fence. Returns False if the timer was already gone."""
    with transaction.atomic():
        leases.check(shard, range_id)
        execution = store.lock_execution(row.execution_id)
        # Deleting first makes firing idempotent: a second processor finds nothing to delete.
        if execution is None or Timer.objects.filter(pk=row.pk).delete()[0] == 0:
            return False
        m = Mutation(store.decode_state(execution), clock.now())
        try:
            _apply(m, row)
        except StaleTask:
            return True
        store.persist(execution, m)
        return True


def process_shard(shard: int, owner: str) -> int:
    """Fire every due timer and run every transfer of `shard` if its lease can be had; returns the count."""
    range_id = leases.acquire(shard, owner)
    if range_id is None:
        return 0
    fired = 0
    try:
        while True:
            rows = store.due_timers(shard, clock.now(), BATCH)
            for row in rows:
                if fire(row, shard=shard, range_id=range_id):
                    fired += 1
            if len(rows) < BATCH:
                break
        fired += transfers.process(shard, range_id)
        fired += schedules.process_due(shard, range_id)
    except leases.LeaseLost:
        log.warning("lost the lease of shard %s while processing it; another worker continues", shard)
        return fired
    leases.release(shard, range_id)
    return fired


def due_shards() -> list[int]:
    """Shards that have timers due now or transfers waiting (reads, so idle sweeps write nothing)."""
    now = clock.now()
    due = set(Timer.objects.filter(fire_at__lte=now).values_list("shard", flat=True).distinct())
    return sorted(due | set(transfers.shards_with_transfers()) | schedules.due_shards(now))


def next_fire_at():  # type: ignore[no-untyped-def]
    first = Timer.objects.aggregate(first=Min("fire_at"))["first"]
    wakeup = schedules.next_wakeup()
    return wakeup if first is None or (wakeup is not None and wakeup < first) else first
