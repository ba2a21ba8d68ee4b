"""The shard side of data key re-encryption: move each due job of a shard a batch per fenced transaction.

A job (engine.models.Reencryption) belongs to its namespace's re-encryption shard; its `next_wakeup_at` is
the due time the shard loop scans (null once finished). Each batch (engine.persistence.reencrypt
`step_locked`) commits with the job's cursors and counters in one transaction that checks the shard's
fence and locks the job's row: a worker that lost the shard writes nothing, and its successor resumes
after the last batch that committed, so no run is skipped or counted twice. A batch that raises is
charged to the job: it backs off and, after the last attempt, is parked (`perdura shards parked`), and
the shard's other work goes on.
"""

from __future__ import annotations

from django.db.models import QuerySet
from perdura import clock

from engine.models import Reencryption
from engine.persistence import leases, reencrypt
from engine.services import write_path
from engine.shards import parking
from engine.shards.budget import Budget

BATCH = 20


def step(pk: int, shard: int, range_id: int) -> bool:
    """One batch of the job, under the shard's fence; False when nothing was left to do."""
    return write_path.in_transaction(lambda: reencrypt.step_locked(pk), shard=shard, range_id=range_id)


def process_due(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Move the due jobs of `shard` a batch at a time while the budget allows; returns how many batches.

    Raises:
        leases.LeaseLost: another worker took the shard; the jobs stay for it.
    """
    budget = budget or Budget()
    moved = 0
    tried: set[int] = set()
    while not budget.spent():
        due = _due().filter(shard=shard, next_wakeup_at__lte=clock.now())
        taken = due.order_by("next_wakeup_at", "id").values_list("pk", flat=True)[:BATCH]
        rows = [pk for pk in taken if pk not in tried]
        if not rows:
            break
        for pk in rows:
            tried.add(pk)
            while not budget.spent():
                try:
                    if not step(pk, shard, range_id):
                        break
                except leases.LeaseLost:
                    raise
                except Exception as e:  # noqa: BLE001 - the job pays for it, never the shard
                    parking.row_failed(
                        queue=parking.REENCRYPTION,
                        pk=pk,
                        shard=shard,
                        range_id=range_id,
                        error=e,
                        label="REENCRYPTION",
                    )
                    break
                moved += 1
    return moved


def _due() -> QuerySet[Reencryption]:
    return Reencryption.objects.filter(parked_at__isnull=True, next_wakeup_at__isnull=False)
