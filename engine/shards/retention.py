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

from datetime import datetime, timedelta
from functools import partial

from perdura import clock

from engine.archival import history as archival_history
from engine.history.retention import Step
from engine.models import Retention
from engine.persistence import leases
from engine.persistence import retention as retention_store
from engine.services import write_path
from engine.shards import parking, retention_pace
from engine.shards.budget import Budget


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
                archival_history.record_txn([archived])
            retention_store.advance_txn([row.pk], Step.VISIBILITY)
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


def _charge(row: Retention, shard: int, range_id: int, error: BaseException) -> None:
    parking.row_failed(
        queue=parking.RETENTION,
        pk=row.pk,
        shard=shard,
        range_id=range_id,
        error=error,
        label=parking.retention_step_name(row.step),
    )


def _one_by_one(rows: list[Retention], shard: int, range_id: int, budget: Budget) -> int:
    """Each row on its own (`delete_run`); a row that raises is charged, and the rest go on."""
    deleted = 0
    for row in rows:
        if budget.spent():
            break
        try:
            if delete_run(row.pk, shard=shard, range_id=range_id, budget=budget):
                deleted += 1
        except leases.LeaseLost:
            raise
        except Exception as e:  # noqa: BLE001 - the row pays for it, never the shard
            _charge(row, shard, range_id, e)
    return deleted


def _archive_group(rows: list[Retention], shard: int, range_id: int, now: datetime) -> list[Retention]:
    """The ARCHIVE step of a group of rows, as `_archive` does it for one: the archives are written and
    verified outside any transaction, a run whose archive failed is charged and left out, and the rest
    have their locations recorded and move on in one fenced transaction. The rows still due, at VISIBILITY."""
    write_path.in_transaction(lambda: None, shard=shard, range_id=range_id)
    results = archival_history.archive_many([r.execution_id for r in rows])
    passed: list[Retention] = []
    for row in rows:
        outcome = results[row.execution_id]
        if isinstance(outcome, Exception):
            _charge(row, shard, range_id, outcome)
        else:
            passed.append(row)
    if not passed:
        return []

    def body() -> list[Retention]:
        locked = retention_store.lock_group([r.pk for r in passed], now)
        archiving = [r for r in locked if r.step == Step.ARCHIVE]
        archived = [results[r.execution_id] for r in archiving]
        archival_history.record_txn([a for a in archived if isinstance(a, archival_history.Archived)])
        retention_store.advance_txn([r.pk for r in archiving], Step.VISIBILITY)
        return locked

    return write_path.in_transaction(body, shard=shard, range_id=range_id)


def _delete_group(rows: list[Retention], shard: int, range_id: int, budget: Budget) -> int:
    """Delete the runs of `rows` (each at ARCHIVE or VISIBILITY) together: the archives first
    (`_archive_group`), then the OpenSearch documents, then every table in as few fenced transactions as
    GROUP_ROWS allows (engine/persistence/retention.py `group_txn`). A group transaction that raises
    (a bad row) is rolled back whole, and its rows go on one by one, so only the bad row is charged."""
    now = clock.now()
    to_archive = [r for r in rows if r.step == Step.ARCHIVE]
    ready = [r for r in rows if r.step != Step.ARCHIVE]
    if to_archive:
        ready += _archive_group(to_archive, shard, range_id, now)
    if not ready:
        return 0
    # Outside any transaction (network calls), but only while the fence is still ours.
    write_path.in_transaction(lambda: None, shard=shard, range_id=range_id)
    for row in ready:
        retention_store.delete_visibility_document(row.execution_id)
    pks = [r.pk for r in ready]
    step: Step | None = Step.VISIBILITY
    gone = 0

    def body(at: Step) -> tuple[Step | None, int]:
        locked = retention_store.lock_group(pks, now)
        return (retention_store.group_txn(locked, at) if locked else None), len(locked)

    try:
        # The first transaction runs even on a spent budget: the archives are written, and a group left
        # at VISIBILITY would be fetched, locked and paced again by the next pass for nothing.
        while step is not None:
            step, gone = write_path.in_transaction(partial(body, step), shard=shard, range_id=range_id)
            if budget.spent():
                break
    except leases.LeaseLost:
        raise
    except Exception:  # noqa: BLE001 - one by one, so that only a bad row pays
        return _one_by_one(retention_store.live(pks), shard, range_id, budget)
    return gone if step is None else 0


def process(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Delete the runs of `shard` whose retention row is due, a group at a time, as fast as the pace allows
    (engine/shards/retention_pace.py); returns how many went. Rows a crash left part way through a
    deletion go one by one (`delete_run`).

    Raises:
        leases.LeaseLost: another worker took the shard.
    """
    budget = budget or Budget()
    deleted = 0
    tried: set[int] = set()
    while not budget.spent():
        wait = retention_pace.seconds_to_token()
        if wait > 0 and not (budget.may_wait and wait < budget.remaining() and budget.sleep(wait)):
            break
        due = retention_store.due(shard, clock.now(), retention_pace.group_size())
        rows = [r for r in due if r.pk not in tried]
        if not rows:
            break
        # A run pays its token once, at its first step; one a crash or a spent budget left part way
        # through goes on free.
        unpaid = [r for r in rows if r.step == Step.ARCHIVE]
        rows = [r for r in rows if r.step != Step.ARCHIVE] + unpaid[: retention_pace.take(len(unpaid))]
        if not rows:
            continue  # the bucket is empty: wait for its next token, or end here
        tried.update(r.pk for r in rows)
        fresh = [r for r in rows if r.step in (Step.ARCHIVE, Step.VISIBILITY)]
        resumed = [r for r in rows if r.step not in (Step.ARCHIVE, Step.VISIBILITY)]
        deleted += _one_by_one(resumed, shard, range_id, budget)
        if fresh:  # even on a spent budget: their tokens are paid
            deleted += _delete_group(fresh, shard, range_id, budget)
    return deleted


def due_shards(now: datetime) -> set[int]:
    """Shards with a retention row due by `now`: one probe per shard of its earliest row. None while the
    pace's bucket is empty: a shard is not worth a pass for retention alone until a token is there."""
    if not retention_pace.ready():
        return set()
    return {shard for shard, first in retention_store.earliest_by_shard().items() if first <= now}


def next_due() -> datetime | None:
    """When retention next has work: the earliest due time of any live retention row (the same per-shard
    probes), or the pace's next token if that is later."""
    first = min(retention_store.earliest_by_shard().values(), default=None)
    if first is None:
        return None
    return max(first, clock.now() + timedelta(seconds=retention_pace.seconds_to_token()))
