"""The shard side of batch operations: take each due batch's targets, one fenced transaction per target.

A batch row belongs to a shard like a schedule does; its `next_wakeup_at` is the due time, and the
shard's pass (engine/shards/timers.py) takes its targets through engine.services.batches at the
batch's pace. A step that raises is charged to the batch row: it backs off and, after the last attempt,
is parked (`perdura shards parked`), and the other batches go on.
"""

from __future__ import annotations

from datetime import datetime

from perdura import clock

from engine.models import BatchOperation
from engine.persistence import leases
from engine.services import batches, write_path
from engine.shards import parking
from engine.shards.budget import Budget

BATCH = 20


def step(pk: int, shard: int, range_id: int) -> batches.StepResult:
    """One target of the batch, under the shard's fence."""
    return write_path.in_transaction(
        lambda: batches.batch_step_locked(pk, shard), shard=shard, range_id=range_id
    )


def process_due(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Take the targets of every due batch of `shard` while their pace and the budget allow; returns how
    many targets were taken.

    Raises:
        leases.LeaseLost: another worker took the shard; the batches stay for it.
    """
    budget = budget or Budget()
    handled = 0
    tried: set[int] = set()
    while not budget.spent():
        due = BatchOperation.objects.filter(
            shard=shard, parked_at__isnull=True, next_wakeup_at__lte=clock.now()
        )
        taken = due.order_by("next_wakeup_at", "id").values_list("pk", flat=True)[:BATCH]
        rows = [pk for pk in taken if pk not in tried]
        if not rows:
            break
        for pk in rows:
            tried.add(pk)
            while not budget.spent():
                try:
                    result = step(pk, shard, range_id)
                except leases.LeaseLost:
                    raise
                except Exception as e:  # noqa: BLE001 - the batch pays for it, never the shard
                    parking.row_failed(
                        queue=parking.BATCH, pk=pk, shard=shard, range_id=range_id, error=e, label="BATCH"
                    )
                    break
                if result.acted:
                    handled += 1
                if result.wake_at is None or result.wake_at > clock.now():
                    break
    return handled


def due_shards(now: datetime) -> set[int]:
    due = BatchOperation.objects.filter(parked_at__isnull=True, next_wakeup_at__lte=now)
    return set(due.values_list("shard", flat=True).distinct())
