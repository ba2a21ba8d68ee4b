"""The shard side of schedules: tick each due schedule row under the shard's fence, wake a schedule early.

A schedule row belongs to a shard like a timer does; its `next_wakeup_at` is the due time, and the
shard's pass (engine/shards/timers.py) ticks it through engine.services.schedules.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import transaction
from perdura import clock

from engine.models import Schedule as ScheduleRow
from engine.persistence import leases, wakeups
from engine.services import schedules, write_path
from engine.shards import parking
from engine.shards.budget import Budget

BATCH = 100


def _tick_row(pk: int, shard: int, range_id: int) -> bool:
    def tick() -> bool:
        row = ScheduleRow.objects.select_for_update().filter(pk=pk, parked_at__isnull=True).first()
        now = clock.now()
        if row is None or row.next_wakeup_at is None or row.next_wakeup_at > now:
            return False  # deleted, parked, or another processor already took it
        schedules.schedule_tick_locked(row, now)
        return True

    return write_path.in_transaction(tick, shard=shard, range_id=range_id)


def process_due(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Tick every live schedule of `shard` whose wake-up time has passed, each on its own; returns how many.

    A tick that raises is charged a failed attempt: the schedule's wake-up moves to its next attempt
    (or it is parked), and the schedules behind it tick in the same pass.

    Raises:
        leases.LeaseLost: another worker took the shard.
    """
    budget = budget or Budget()
    handled = 0
    tried: set[int] = set()
    while not budget.spent():
        due = ScheduleRow.objects.filter(shard=shard, parked_at__isnull=True, next_wakeup_at__lte=clock.now())
        taken = due.order_by("next_wakeup_at", "id").values_list("pk", flat=True)[:BATCH]
        rows = [pk for pk in taken if pk not in tried]
        if not rows:
            break
        for pk in rows:
            if budget.spent():
                break
            tried.add(pk)
            try:
                if _tick_row(pk, shard, range_id):
                    handled += 1
            except leases.LeaseLost:
                raise
            except Exception as e:  # noqa: BLE001 - the schedule pays for it, never the shard
                parking.row_failed(
                    queue=parking.SCHEDULE,
                    pk=pk,
                    shard=shard,
                    range_id=range_id,
                    error=e,
                    label="SCHEDULE_TICK",
                )
                continue
    return handled


def schedule_wake(*, namespace_id: uuid.UUID, schedule_id: str) -> None:
    """A run the schedule started closed: have the shard owner look at the schedule now."""
    now = clock.now()
    with transaction.atomic():
        row = (
            ScheduleRow.objects.select_for_update()
            .filter(namespace_id=namespace_id, schedule_id=schedule_id)
            .first()
        )
        if row is None:
            return
        if row.parked_at is not None:
            return  # parked: only `perdura shards redrive` brings it back
        if row.next_wakeup_at is None or row.next_wakeup_at > now:
            ScheduleRow.objects.filter(pk=row.pk).update(next_wakeup_at=now)
        wakeups.schedule_due(row.shard)


def due_shards(now: datetime) -> set[int]:
    due = ScheduleRow.objects.filter(parked_at__isnull=True, next_wakeup_at__lte=now)
    return set(due.values_list("shard", flat=True).distinct())
