"""Move a namespace's old ciphertexts to its current data key, online (after `perdura namespace rotate-key`).

The job (engine.models.Reencryption) walks the namespace's runs by row id, then its schedules, a batch at
a time, and last its batch operations. Each sealed column (a run's state, history batches, pending
transfers and visibility memo; a schedule's record and memo; a batch operation's operation) still sealed under a version older than the job's target is opened and sealed
again, and written only if it is still the blob that was read: a write path that changed it meanwhile
sealed it under the current key already. Each batch commits with its cursors, so a crash loses at most
the batch in hand, and the job resumes after the last one that committed.

The job runs in the background workers, never in the process that asked for it: `start` only queues
it (a row of the namespace's re-encryption shard, due once every process seals with the new version),
and the shard's lease holder (engine/shards/reencryption.py, in `perdura dev` the in-process shard loop)
takes a batch per transaction, fenced on its lease, with the job's row locked: a worker killed mid-job
leaves the job to the shard's next owner within a lease, and no two workers move it (or count its runs)
at once.

Old data stays readable at every moment: every version of the data key is kept, and a blob names the
version that sealed it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, models, transaction
from perdura import clock, env

from engine import ids
from engine.models import BatchOperation, Execution, HistoryBatch, Reencryption, Schedule, Transfer
from engine.persistence import encryption, wakeups
from engine.persistence.visibility import memo_aad
from tenants import datakeys
from visibility.models import VisibilityRecord

BATCH = 50
"""Runs (or schedules) per step by default (PERDURA_REENCRYPT_BATCH). A step is one transaction (one commit, where a commit per row made
SQLite's fsyncs the whole cost); its writes lock only the rows they change, each for the step's few ms."""

COMMIT_MARGIN = 2.0
"""Seconds beyond PERDURA_DATAKEY_REFRESH_SECONDS: a write sealed just before a process refreshed commits
within it."""


def sealed_version(blob: bytes | memoryview) -> int | None:
    """The data key version a ciphertext was sealed under (None: empty or not a Perdura ciphertext)."""
    blob = bytes(blob)
    if len(blob) < 5 or blob[0] != encryption.FORMAT:
        return None
    return int.from_bytes(blob[1:5], "big")


def _stale(blob: bytes | memoryview, target: int) -> bool:
    version = sealed_version(blob)
    return version is not None and version < target


def _reseal(namespace_id: uuid.UUID, blob: bytes | memoryview, aad: bytes, target: int) -> bytes:
    plaintext = encryption.unseal(namespace_id, bytes(blob), aad)
    return encryption.seal(namespace_id, plaintext, aad, version=target)


@dataclass(frozen=True)
class Progress:
    runs_done: int
    runs_total: int
    rewritten: int
    finished: bool


def progress_of(job: Reencryption) -> Progress:
    return Progress(job.runs_done, job.runs_total, job.rewritten, job.finished_at is not None)


def last_job(namespace_id: uuid.UUID) -> Reencryption | None:
    """The namespace's latest re-encryption (under way or finished), for `--status` and the console."""
    return Reencryption.objects.filter(namespace_id=namespace_id).order_by("-started_at", "-pk").first()


def start_delay() -> timedelta:
    """How long after a rotation every process seals with the new version (PERDURA_DATAKEY_REFRESH_SECONDS
    and a margin for transactions that sealed just before it): a scan that began sooner could pass rows
    still being sealed under the old version, so a job is not due before it."""
    return timedelta(seconds=env.datakey_refresh_seconds() + COMMIT_MARGIN)


def shard_of(namespace_id: uuid.UUID) -> int:
    """The shard whose lease holder moves the namespace's re-encryption."""
    return ids.shard_for(namespace_id, "reencrypt", settings.PERDURA_SHARDS)


def start(namespace_id: uuid.UUID) -> Reencryption:
    """Queue a job towards the namespace's current data key version (or answer its unfinished one), due
    when every process seals with that version; the shard's workers move it."""
    job = Reencryption.objects.filter(namespace_id=namespace_id, finished_at__isnull=True).first()
    if job is not None:
        return job
    now = clock.now()
    key = datakeys.current_key(namespace_id)
    due = max(now, key.created_at + start_delay()) if key is not None and key.version > 1 else now
    shard = shard_of(namespace_id)
    try:
        with transaction.atomic():
            job = Reencryption.objects.create(
                namespace_id=namespace_id,
                shard=shard,
                next_wakeup_at=due,
                target_version=datakeys.current_version(namespace_id),
                runs_total=Execution.objects.filter(namespace_id=namespace_id).count(),
                started_at=now,
                updated_at=now,
            )
            wakeups.schedule_due(shard)
            return job
    except IntegrityError:  # another process queued it at the same moment
        return Reencryption.objects.get(namespace_id=namespace_id, finished_at__isnull=True)


def _compare_and_set(
    model: type[models.Model], column: str, guard: str, rows: Sequence[tuple[Any, ...]]
) -> int:
    """Set `column` of each row (pk, guard value, new value) whose `guard` column still holds the value
    read; one statement for the lot. Answers how many rows changed."""
    if not rows:
        return 0
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    sql = (
        f"UPDATE {table} SET {connection.ops.quote_name(column)} = v.column3 FROM (VALUES {values}) AS v "
        f"WHERE {table}.{pk} = v.column1 AND {table}.{connection.ops.quote_name(guard)} = v.column2"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row])
        return cursor.rowcount


def _runs_rows(namespace_id: uuid.UUID, runs: list[Execution], target: int) -> int:
    """Re-seal what the runs hold under older versions: a few reads and at most four writes for all."""
    run_ids = {execution.pk: execution.run_id for execution in runs}
    states = [
        (
            e.pk,
            e.db_version,
            _reseal(namespace_id, e.state, encryption.state_aad(namespace_id, e.run_id), target),
        )
        for e in runs
        if _stale(e.state, target)
    ]
    batches = [
        (
            pk,
            bytes(data),
            _reseal(namespace_id, data, encryption.history_aad(namespace_id, run_ids[run], first), target),
        )
        for pk, run, first, data in HistoryBatch.objects.filter(execution_id__in=run_ids).values_list(
            "pk", "execution_id", "first_event_id", "data"
        )
        if _stale(data, target)
    ]
    transfers = [
        (
            pk,
            bytes(details),
            _reseal(
                namespace_id, details, encryption.transfer_aad(namespace_id, run_ids[run], event_id), target
            ),
        )
        for pk, run, event_id, details in Transfer.objects.filter(execution_id__in=run_ids).values_list(
            "pk", "execution_id", "event_id", "details"
        )
        if _stale(details, target)
    ]
    memos = [
        (run, bytes(memo), _reseal(namespace_id, memo, memo_aad(namespace_id, run_ids[run]), target))
        for run, memo in VisibilityRecord.objects.filter(execution_id__in=run_ids).values_list(
            "execution_id", "memo"
        )
        if memo and _stale(memo, target)
    ]
    # db_version is the writers' guard: a writer that read the old state still commits (its own seal).
    return (
        _compare_and_set(Execution, "state", "db_version", states)
        + _compare_and_set(HistoryBatch, "data", "data", batches)
        + _compare_and_set(Transfer, "details", "details", transfers)
        + _compare_and_set(VisibilityRecord, "memo", "memo", memos)
    )


def _schedule_rows(namespace_id: uuid.UUID, schedule: Schedule, target: int) -> int:
    rewritten = 0
    for part in ("data", "memo"):
        blob = getattr(schedule, part)
        if blob and _stale(blob, target):
            aad = encryption.schedule_aad(namespace_id, schedule.schedule_id, part)
            sealed = _reseal(namespace_id, blob, aad, target)
            rewritten += Schedule.objects.filter(pk=schedule.pk, **{part: bytes(blob)}).update(
                **{part: sealed}
            )
    return rewritten


def _batch_rows(namespace_id: uuid.UUID, target: int) -> int:
    """Every batch operation's sealed operation (signal input, reset options), at the end of the move: a
    namespace has few batches (one running at a time), so they need no cursor of their own."""
    rewritten = 0
    for pk, job_id, blob in BatchOperation.objects.filter(namespace_id=namespace_id).values_list(
        "pk", "job_id", "operation"
    ):
        if blob and _stale(blob, target):
            sealed = _reseal(namespace_id, blob, encryption.batch_aad(namespace_id, job_id), target)
            rewritten += BatchOperation.objects.filter(pk=pk, operation=bytes(blob)).update(operation=sealed)
    return rewritten


def retry(pk: int) -> bool:
    """Make a parked job due now with its attempts reset (as `perdura shards redrive` does); False when it
    was not parked."""
    now = clock.now()
    with transaction.atomic():
        job = Reencryption.objects.select_for_update().filter(pk=pk, parked_at__isnull=False).first()
        if job is None:
            return False
        Reencryption.objects.filter(pk=pk).update(
            failures=0, last_error="", parked_at=None, next_wakeup_at=now, updated_at=now
        )
        wakeups.schedule_due(job.shard)
    return True


def step_locked(pk: int, *, batch: int | None = None) -> bool:
    """Inside a transaction (the shard's fenced one): move the job's next batch with its row locked, and
    save its cursors with it. False when the job is finished, parked or not due (nothing was done)."""
    job = (
        Reencryption.objects.select_for_update()
        .filter(pk=pk, parked_at__isnull=True, next_wakeup_at__lte=clock.now())
        .first()
    )
    if job is None or job.finished_at is not None:
        return False
    _step(job, batch if batch is not None else settings.PERDURA_REENCRYPT_BATCH)
    return True


def step(job: Reencryption, batch: int | None = None) -> bool:
    """Move one batch of `job` outside any shard (tests, to stop a job half way); False once it is
    finished. `job` is brought up to date."""
    with transaction.atomic():
        moved = step_locked(job.pk, batch=batch)
    job.refresh_from_db()
    return moved and job.finished_at is None


def _step(job: Reencryption, batch: int) -> bool:
    namespace_id = job.namespace_id
    rewritten = 0
    runs = list(
        Execution.objects.filter(namespace_id=namespace_id, pk__gt=job.runs_after)
        .only("pk", "run_id", "state", "db_version")
        .order_by("pk")[:batch]
    )
    if runs:
        rewritten += _runs_rows(namespace_id, runs, job.target_version)
        job.runs_after = runs[-1].pk
        job.runs_done += len(runs)
    else:
        schedules = list(
            Schedule.objects.filter(namespace_id=namespace_id, pk__gt=job.schedules_after).order_by("pk")[
                :batch
            ]
        )
        for schedule in schedules:
            rewritten += _schedule_rows(namespace_id, schedule, job.target_version)
        if schedules:
            job.schedules_after = schedules[-1].pk
        else:
            rewritten += _batch_rows(namespace_id, job.target_version)
            job.finished_at = clock.now()
            job.next_wakeup_at = None
    job.rewritten += rewritten
    job.runs_total = max(job.runs_total, job.runs_done)
    job.updated_at = clock.now()
    job.save(
        update_fields=[
            "runs_after",
            "schedules_after",
            "runs_done",
            "runs_total",
            "rewritten",
            "updated_at",
            "finished_at",
            "next_wakeup_at",
        ]
    )
    return job.finished_at is None


def stale_count(namespace_id: uuid.UUID) -> int:
    """Ciphertexts of the namespace still sealed under an older version than its current one (a full
    scan: for tests and `--check`, not for the hot path)."""
    target = datakeys.current_version(namespace_id)
    count = 0
    for execution in Execution.objects.filter(namespace_id=namespace_id).only("pk", "state"):
        count += _stale(execution.state, target)
        count += sum(
            _stale(d, target)
            for d in HistoryBatch.objects.filter(execution_id=execution.pk).values_list("data", flat=True)
        )
        count += sum(
            _stale(d, target)
            for d in Transfer.objects.filter(execution_id=execution.pk).values_list("details", flat=True)
        )
        memo = (
            VisibilityRecord.objects.filter(execution_id=execution.pk).values_list("memo", flat=True).first()
        )
        if memo:
            count += _stale(memo, target)
    for schedule in Schedule.objects.filter(namespace_id=namespace_id):
        count += bool(schedule.data) and _stale(schedule.data, target)
        count += bool(schedule.memo) and _stale(schedule.memo, target)
    for blob in BatchOperation.objects.filter(namespace_id=namespace_id).values_list("operation", flat=True):
        count += bool(blob) and _stale(blob, target)
    return count
