"""Failure isolation of the shard queues: retry with backoff, park after the last attempt, redrive.

Every shard queue (timers, transfers, visibility indexing, schedule ticks, retention, batches, re-encryption)
handles one row at a time.
When a row's processing raises, the row (not the shard, not the loop) pays for it:

- its failure count goes up, its last error is kept, and its due time moves to its next attempt
  (engine/shards/backoff.py), so the rows behind it, in this shard and in others, go on at once;
- after PERDURA_SHARD_MAX_ATTEMPTS attempts it is parked: kept, out of every due query, listed by
  `perdura shards parked`, made due again by `perdura shards redrive`.

What is not a row's fault is told apart explicitly, and never charged to a row:

- `leases.LeaseLost`: another worker owns the shard now; the pass stops and the rows stay for it;
- `StaleTask`: the row no longer matches its run; a normal no-op outcome (handled by each queue);
- an outage (the database unreachable, OpenSearch down): the pass stops (`Outage`) or waits with the
  process-wide OpenSearch backoff (engine/shards/visibility_index.py); rows keep their counts.

A new queue (retention and batches did; archival) derives its model from `ShardQueueRow`, puts `parked_at IS NULL`
in its due index's condition, adds itself to the tables below and calls `row_failed` from its loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, models, transaction
from perdura import clock

from engine.history.mutation import TimerKind, TransferKind
from engine.history.retention import Step
from engine.models import BatchOperation, Reencryption, Retention, Schedule, Timer, Transfer
from engine.persistence import leases
from engine.shards import backoff
from engine.shards.failure_log import FailureLog

log = logging.getLogger("perdura.shards")
failure_log = FailureLog(log)

TIMER, TRANSFER, VISIBILITY, SCHEDULE = "timer", "transfer", "visibility", "schedule"
RETENTION, BATCH, REENCRYPTION = "retention", "batch", "reencryption"
QUEUES = (TIMER, TRANSFER, VISIBILITY, SCHEDULE, RETENTION, BATCH, REENCRYPTION)
"""The shard queues; visibility rows are transfer rows of kind VISIBILITY, counted apart."""

_MODELS: dict[str, type[models.Model]] = {
    TIMER: Timer,
    TRANSFER: Transfer,
    VISIBILITY: Transfer,
    SCHEDULE: Schedule,
    RETENTION: Retention,
    BATCH: BatchOperation,
    REENCRYPTION: Reencryption,
}
_DUE_FIELD = {
    TIMER: "fire_at",
    TRANSFER: "retry_at",
    VISIBILITY: "retry_at",
    SCHEDULE: "next_wakeup_at",
    RETENTION: "due_at",
    BATCH: "next_wakeup_at",
    REENCRYPTION: "next_wakeup_at",
}


class Outage(Exception):
    """Processing cannot go on for a reason that is no row's fault (the database is unreachable)."""


def policy() -> backoff.RetryPolicy:
    return backoff.RetryPolicy(max_attempts=settings.PERDURA_SHARD_MAX_ATTEMPTS)


def _database_reachable() -> bool:
    try:
        connection.close_if_unusable_or_obsolete()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DatabaseError:
        return False


def is_outage(error: BaseException) -> bool:
    """True if `error` is the database failing rather than the row: connection-level errors while the
    database does not answer. A row that fails with an OperationalError while the database answers (a
    statement timeout, SQLite's "too many variables") is the row's fault and is charged to it."""
    if not isinstance(error, OperationalError | InterfaceError):
        return False
    if "database is locked" in str(error):
        return True  # SQLite: another process holds the write lock for a while; no row's fault
    if connection.in_atomic_block:
        return True  # cannot probe inside the caller's transaction; let the caller's pass stop
    return not _database_reachable()


def row_failed(
    *, queue: str, pk: int, shard: int, range_id: int, error: BaseException, label: str = ""
) -> backoff.AfterFailure | None:
    """Charge a failed attempt to a row, under the shard's fence: back off or park it.

    Call it outside the failed row's transaction (which has rolled back).

    Args:
        queue: one of QUEUES.
        pk: the row's primary key.
        shard, range_id: the lease the processor holds.
        error: what the processing raised.
        label: what the row is, for the log (its kind).

    Returns:
        The row's new state, or None if the row is gone (another processor finished it) or parked.

    Raises:
        leases.LeaseLost: the shard moved on; the row is left for its new owner.
        Outage: the database failed while recording the failure.
    """
    if is_outage(error):
        raise Outage(str(error)) from error
    try:
        return _charge(queue=queue, pk=pk, shard=shard, range_id=range_id, error=error, label=label)
    except (leases.LeaseLost, Outage):
        raise
    except Exception as e:  # noqa: BLE001 - a bug in the bookkeeping must not stop the pass either
        failure_log.failed(
            f"charge:{queue}", f"could not record the failure of {queue} row {pk}; it is retried next pass", e
        )
        return None


def _charge(
    *, queue: str, pk: int, shard: int, range_id: int, error: BaseException, label: str
) -> backoff.AfterFailure | None:
    model = _MODELS[queue]
    now = clock.now()
    try:
        with transaction.atomic():
            leases.check(shard, range_id)
            before = (
                model.objects.select_for_update()  # type: ignore[attr-defined]  # _MODELS' models all have `objects`
                .filter(pk=pk, parked_at__isnull=True)
                .values_list("failures", flat=True)
                .first()
            )
            if before is None:
                return None
            outcome = backoff.after_failure(failures_before=before, now=now, policy=policy())
            fields: dict[str, object] = {
                "failures": outcome.failures,
                "last_error": backoff.describe_error(error),
            }
            if outcome.parked:
                fields["parked_at"] = now
                if queue in (TRANSFER, VISIBILITY):
                    fields["retry_at"] = None
            else:
                fields[_DUE_FIELD[queue]] = outcome.retry_at
            model.objects.filter(pk=pk).update(**fields)  # type: ignore[attr-defined]  # as in _charge's read
    except leases.LeaseLost:
        raise
    except (OperationalError, InterfaceError) as e:
        raise Outage(str(e)) from e
    # Rate-limited per queue, kind and error, not per row: a hundred thousand rows failing alike log one
    # traceback and then a count per minute (each row's own error is on the row).
    label = label or queue
    what = f"{queue} row {pk} ({label}) of shard {shard}"
    if outcome.parked:
        failure_log.failed(
            f"parked:{queue}:{label}",
            f"{what} parked after {outcome.failures} failed attempts "
            f"(`perdura shards parked` lists it, `perdura shards redrive {queue}:{pk}` retries it)",
            error,
            traceback=False,
        )
    else:
        failure_log.failed(
            f"failed:{queue}:{label}:{type(error).__name__}",
            f"{what} failed (attempt {outcome.failures} of {policy().max_attempts}); "
            f"it waits until {outcome.retry_at:%H:%M:%S} while the rows behind it go on",
            error,
        )
    return outcome


# --- the operator's view ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParkedRow:
    """A parked shard queue row, as `perdura shards parked` shows it."""

    id: str
    """`<queue>:<pk>`: what `perdura shards redrive` takes."""
    queue: str
    shard: int
    namespace: str
    workflow_id: str
    """The run's workflow id; a schedule's id for schedule rows, a batch's job id for batch rows."""
    run_id: str
    kind: str
    attempts: int
    last_error: str
    parked_at: datetime


def _kind_name(enum: type[TimerKind] | type[TransferKind], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"UNKNOWN({value})"


def retention_step_name(step: int) -> str:
    """How a retention row's step shows as its kind (`RETENTION_HISTORY`)."""
    try:
        return f"RETENTION_{Step(step).name}"
    except ValueError:
        return f"RETENTION_UNKNOWN({step})"


def _run_row(queue: str, row: Timer | Transfer | Retention, kind: str) -> ParkedRow:
    """A parked row of one run's queue (timers, transfers, visibility, retention)."""
    run = row.execution
    return ParkedRow(
        id=f"{queue}:{row.pk}",
        queue=queue,
        shard=row.shard,
        namespace=run.namespace.name,
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        kind=kind,
        attempts=row.failures,
        last_error=row.last_error,
        parked_at=row.parked_at,  # type: ignore[arg-type]  # parked rows only: never None
    )


def _namespace_row(
    queue: str, row: Schedule | BatchOperation | Reencryption, name: str, kind: str
) -> ParkedRow:
    """A parked row of a namespace's queue (schedule ticks, batches, re-encryptions), named by its schedule
    or job id."""
    return ParkedRow(
        id=f"{queue}:{row.pk}",
        queue=queue,
        shard=row.shard,
        namespace=row.namespace.name,
        workflow_id=name,
        run_id="",
        kind=kind,
        attempts=row.failures,
        last_error=row.last_error,
        parked_at=row.parked_at,  # type: ignore[arg-type]  # parked rows only: never None
    )


def parked_list(*, namespace: str | None = None) -> list[ParkedRow]:
    """Every parked row (of one namespace, by name, if given), oldest parking first."""
    of_run = {} if namespace is None else {"execution__namespace__name": namespace}
    of_namespace = {} if namespace is None else {"namespace__name": namespace}
    parked = {"parked_at__isnull": False}
    rows: list[ParkedRow] = []
    for t in Timer.objects.filter(**parked, **of_run).select_related("execution__namespace"):
        rows.append(_run_row(TIMER, t, _kind_name(TimerKind, t.kind)))
    for r in Transfer.objects.filter(**parked, **of_run).select_related("execution__namespace"):
        queue = VISIBILITY if r.kind == TransferKind.VISIBILITY else TRANSFER
        rows.append(_run_row(queue, r, _kind_name(TransferKind, r.kind)))
    for p in Retention.objects.filter(**parked, **of_run).select_related("execution__namespace"):
        rows.append(_run_row(RETENTION, p, retention_step_name(p.step)))
    for s in Schedule.objects.filter(**parked, **of_namespace).select_related("namespace"):
        rows.append(_namespace_row(SCHEDULE, s, s.schedule_id, "SCHEDULE_TICK"))
    for b in BatchOperation.objects.filter(**parked, **of_namespace).select_related("namespace"):
        rows.append(_namespace_row(BATCH, b, b.job_id, "BATCH_STEP"))
    for e in Reencryption.objects.filter(**parked, **of_namespace).select_related("namespace"):
        rows.append(_namespace_row(REENCRYPTION, e, f"to-version-{e.target_version}", "REENCRYPTION_BATCH"))
    return sorted(rows, key=lambda r: (r.parked_at, r.id))


def parked_counts() -> dict[str, int]:
    """Parked rows per queue (every queue present, 0 included): what the metrics export reads."""
    parked = Transfer.objects.filter(parked_at__isnull=False)
    return {
        TIMER: Timer.objects.filter(parked_at__isnull=False).count(),
        TRANSFER: parked.exclude(kind=TransferKind.VISIBILITY).count(),
        VISIBILITY: parked.filter(kind=TransferKind.VISIBILITY).count(),
        SCHEDULE: Schedule.objects.filter(parked_at__isnull=False).count(),
        RETENTION: Retention.objects.filter(parked_at__isnull=False).count(),
        BATCH: BatchOperation.objects.filter(parked_at__isnull=False).count(),
        REENCRYPTION: Reencryption.objects.filter(parked_at__isnull=False).count(),
    }


def parse_id(text: str) -> tuple[str, int]:
    """`timer:12` → (`timer`, 12).

    Raises:
        ValueError: not `<queue>:<number>` with a known queue.
    """
    queue, _, pk = text.partition(":")
    if queue not in QUEUES or not pk.isdigit():
        raise ValueError(
            f"{text!r} is not a parked row id (<queue>:<number>, queue one of {', '.join(QUEUES)})"
        )
    return queue, int(pk)


def parked_redrive(*, ids: Sequence[str] | None = None) -> int:
    """Make parked rows due now with their attempts reset; all of them when `ids` is None.

    The shard processors take them at their next pass (at most a sweep away).

    Returns:
        How many rows were redriven (ids that are not parked rows are skipped).

    Raises:
        ValueError: an id is malformed (nothing is changed then).
    """
    wanted: dict[type[models.Model], list[int]] | None = None
    if ids is not None:
        wanted = {}
        for text in ids:
            queue, pk = parse_id(text)
            wanted.setdefault(_MODELS[queue], []).append(pk)
    now = clock.now()
    reset = {"failures": 0, "last_error": "", "parked_at": None}
    due: dict[type[models.Model], dict[str, object]] = {
        Timer: {"fire_at": now},
        Transfer: {"retry_at": None},
        Schedule: {"next_wakeup_at": now},
        Retention: {"due_at": now},
        BatchOperation: {"next_wakeup_at": now},
        Reencryption: {"next_wakeup_at": now},
    }
    done = 0
    with transaction.atomic():
        for model, fields in due.items():
            rows = model.objects.filter(parked_at__isnull=False)  # type: ignore[attr-defined]  # each has `objects`
            if wanted is not None:
                if model not in wanted:
                    continue
                rows = rows.filter(pk__in=wanted[model])
            done += rows.update(**reset, **fields)
    return done
