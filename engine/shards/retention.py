"""Deleting expired runs: each due retention row of a shard, in fenced, bounded, resumable steps.

A retention row (engine.models.Retention) is written in the transaction that closes its run, due at
the close time plus the namespace's retention. When it is due, the shard's lease holder first archives
the run's history if its namespace archives histories (engine/archival/history.py: written, read back
and compared, outside any transaction, then its location recorded in a fenced one); a store that is
down fails the step, and nothing is deleted until it passes. Then it deletes the
run step by step (engine.history.retention.Step): the OpenSearch document (with a tombstone, so a
late index write cannot bring it back) and the visibility record first, then history, tasks,
queries, timers and transfers, each a transaction of at most BATCH_ROWS rows, and the run's row and
the retention row last. Every transaction re-checks the shard's fence (`range_id`), and saves the
step reached with its last delete: a crash, a lost lease or a spent budget resumes where it stopped,
and a step that runs twice deletes nothing more. A step that raises charges the row a failed attempt
(backoff, then parking, engine/shards/parking.py) and the rows behind it go on.
"""

from __future__ import annotations

from datetime import datetime

from perdura import clock

from engine.archival import history as archival_history
from engine.history.retention import Step
from engine.models import Retention
from engine.persistence import leases
from engine.persistence import retention as retention_store
from engine.services import write_path
from engine.shards import parking
from engine.shards.budget import Budget

BATCH = 100


def _fenced_step(pk: int, shard: int, range_id: int, now: datetime) -> tuple[Step | None, bool]:
    """One fenced transaction of the row's current step; (next step, whether the row is still due)."""

    def body() -> tuple[Step | None, bool]:
        row = retention_store.lock(pk)
        if row is None or row.due_at > now:
            return None, False  # gone (another processor finished it), parked, or redated
        return retention_store.step_txn(row, Step(row.step)), True

    return write_path.in_transaction(body, shard=shard, range_id=range_id)


def _archive(pk: int, execution_pk: int, shard: int, range_id: int, now: datetime) -> bool:
    """The ARCHIVE step: archive and verify the run's history (when its namespace archives histories),
    then record where it went and move the row on, fenced. False: the row is no longer due here.

    An archive written by a processor that then loses the shard is written again by the next one (same
    object name, same events): idempotent. A processor that lost the shard after its fence check may
    still put its copy (same events, another nonce) after the new owner recorded its checksum; reads
    check an object by its AES-GCM tag, not by the recorded checksum, so it stays readable.
    """
    # Outside any transaction (network calls), but only while the fence is still ours.
    write_path.in_transaction(lambda: None, shard=shard, range_id=range_id)
    archived = archival_history.archive(execution_pk)

    def body() -> bool:
        row = retention_store.lock(pk)
        if row is None or row.due_at > now:
            return False
        if row.step == Step.ARCHIVE:
            if archived is not None:
                archival_history.record_txn(archived)
            retention_store.advance_txn(row, Step.VISIBILITY)
        return True

    return write_path.in_transaction(body, shard=shard, range_id=range_id)


def delete_run(pk: int, *, shard: int, range_id: int, budget: Budget | None = None) -> bool:
    """Advance the deletion of retention row `pk` until the run is gone or the budget is spent.

    Returns:
        True when the run (and the row) are gone.

    Raises:
        leases.LeaseLost: the shard moved on; nothing more was deleted.
    """
    budget = budget or Budget()
    now = clock.now()
    live = Retention.objects.filter(pk=pk, parked_at__isnull=True, due_at__lte=now)
    found = live.values_list("step", "execution_id").first()
    if found is None:
        return False  # gone (another processor finished it), parked, or not due
    step: Step | None = Step(found[0])
    if step is Step.ARCHIVE:
        if not _archive(pk, found[1], shard, range_id, now):
            return False
        step = Step.VISIBILITY
    if step is Step.VISIBILITY:
        # Outside any transaction (a network call), but only while the fence is still ours.
        write_path.in_transaction(lambda: None, shard=shard, range_id=range_id)
        retention_store.delete_visibility_document(found[1])
    while step is not None and not budget.spent():
        step, due = _fenced_step(pk, shard, range_id, now)
        if not due:
            return False
    return step is None


def process(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Delete the runs of `shard` whose retention row is due, each on its own; returns how many went.

    Raises:
        leases.LeaseLost: another worker took the shard.
    """
    budget = budget or Budget()
    deleted = 0
    tried: set[int] = set()
    while not budget.spent():
        rows = [r for r in retention_store.due(shard, clock.now(), BATCH) if r.pk not in tried]
        if not rows:
            break
        for row in rows:
            if budget.spent():
                break
            tried.add(row.pk)
            try:
                if delete_run(row.pk, shard=shard, range_id=range_id, budget=budget):
                    deleted += 1
            except leases.LeaseLost:
                raise
            except Exception as e:  # noqa: BLE001 - the row pays for it, never the shard
                parking.row_failed(
                    queue=parking.RETENTION,
                    pk=row.pk,
                    shard=shard,
                    range_id=range_id,
                    error=e,
                    label=parking.retention_step_name(row.step),
                )
    return deleted


def due_shards(now: datetime) -> set[int]:
    """Shards with a retention row due by `now`: one probe per shard of its earliest row."""
    return {shard for shard, first in retention_store.earliest_by_shard().items() if first <= now}


def next_due() -> datetime | None:
    """The earliest due time of any live retention row (the same per-shard probes)."""
    return min(retention_store.earliest_by_shard().values(), default=None)
