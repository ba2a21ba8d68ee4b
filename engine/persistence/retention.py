"""Retention rows on disk: created when a run closes, probed per shard, and the run's bounded deletes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection

from engine.history import retention as rules
from engine.history.retention import Step
from engine.models import CurrentRun, Execution, Retention
from engine.persistence import visibility
from tenants import archival
from tenants.models import Namespace
from visibility.backends import backend
from visibility.backends.sql import records
from visibility.models import VisibilityRecord


def schedule_txn(execution: Execution, close_time: datetime) -> None:
    """Inside the transaction closing `execution` (after its visibility record was written): its
    retention row, due at close + the namespace's retention in force now (a later change of retention
    leaves it as it is, as in Temporal); and when the namespace archives visibility, the run's record
    copied to the archive index, where it stays after the run is deleted."""
    retention, archive_state, archive_uri = (
        Namespace.objects.filter(pk=execution.namespace_id)
        .values_list("retention", "visibility_archival_state", "visibility_archival_uri")
        .get()
    )
    if archive_state == archival.State.ENABLED and archive_uri:
        records.archive_copy_txn(execution.pk, archive_uri)
    Retention.objects.bulk_create(
        [
            Retention(
                shard=execution.shard,
                due_at=rules.due_at(close_time, rules.effective(retention)),
                execution_id=execution.pk,
                namespace_id=execution.namespace_id,
            )
        ],
        ignore_conflicts=True,  # one row per run, whoever wrote it first (a backfill, a retried close)
    )


def due(shard: int, now: datetime, limit: int) -> list[Retention]:
    """Live retention rows of `shard` due by `now`, oldest first (parked rows are out of the index)."""
    rows = Retention.objects.filter(shard=shard, parked_at__isnull=True, due_at__lte=now)
    return list(rows.order_by("due_at", "id")[:limit])


def earliest_by_shard() -> dict[int, datetime]:
    """Each shard's earliest live due time, for the shards that have one.

    One statement of one index probe per shard (MIN over `retention_live_due` for that shard): the
    sweep never walks the far-future rows of closed runs.
    """
    shards = ", ".join(f"({s})" for s in range(settings.PERDURA_SHARDS))
    sql = (
        "SELECT s.column1, (SELECT MIN(r.due_at) FROM engine_retention r "
        "WHERE r.shard = s.column1 AND r.parked_at IS NULL) "
        f"FROM (VALUES {shards}) AS s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    found: dict[int, datetime] = {}
    for shard, first in rows:
        if first is None:
            continue
        if isinstance(first, str):  # SQLite hands raw columns back as text, in UTC
            first = datetime.fromisoformat(first).replace(tzinfo=UTC)
        found[int(shard)] = first
    return found


def delete_visibility_document(execution_pk: int) -> None:
    """Remove the run's OpenSearch document (when that backend is on), leaving a tombstone above the
    run's last version so a late index write of the run is refused. Idempotent (a missing document
    is fine). Done before the record's delete: while the record exists the document may be rewritten."""
    if not visibility.indexed_async():
        return
    version = Execution.objects.filter(pk=execution_pk).values_list("db_version", flat=True).first()
    if version is None:
        return
    backend().delete(str(execution_pk), version + 1)  # type: ignore[attr-defined]


def _delete_some(table: str, execution_pk: int, limit: int, extra: str = "") -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN "
            f"(SELECT id FROM {table} WHERE execution_id = %s{extra} ORDER BY id LIMIT %s)",
            [execution_pk, limit],
        )
        return cursor.rowcount


def _visibility(row: Retention, limit: int) -> int:
    VisibilityRecord.objects.filter(execution_id=row.execution_id).delete()
    # Index rows of the run are moot now; a processor holding one finds no record and drops it.
    return _delete_some("engine_transfer", row.execution_id, limit, " AND kind = 7")


def _run(row: Retention, limit: int) -> int:
    execution = Execution.objects.filter(pk=row.execution_id).values("namespace_id", "workflow_id", "run_id")
    found = execution.first()
    if found is not None:
        CurrentRun.objects.filter(**found).delete()
    Retention.objects.filter(pk=row.pk).delete()
    # The run's row last, and without Django's cascade: a table added later that still holds a row of
    # the run fails this transaction (a deferred foreign key) instead of being emptied unnoticed.
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM engine_execution WHERE id = %s", [row.execution_id])
        return cursor.rowcount


def advance_txn(row: Retention, step: Step) -> None:
    """Inside the caller's (fenced) transaction: the row's retention goes on at `step` (the ARCHIVE step
    ends here, its archive written and verified outside: engine/shards/retention.py)."""
    Retention.objects.filter(pk=row.pk).update(step=step)


STEPS: dict[Step, Callable[[Retention, int], int]] = {
    Step.VISIBILITY: _visibility,
    Step.HISTORY: lambda row, limit: _delete_some("engine_historybatch", row.execution_id, limit),
    Step.TASKS: lambda row, limit: _delete_some("engine_task", row.execution_id, limit),
    Step.QUERIES: lambda row, limit: _delete_some("engine_query", row.execution_id, limit),
    Step.TIMERS: lambda row, limit: _delete_some("engine_timer", row.execution_id, limit),
    Step.TRANSFERS: lambda row, limit: _delete_some("engine_transfer", row.execution_id, limit),
    Step.RUN: _run,
}
"""One handler per deletion step: delete at most `limit` of the run's rows, inside the caller's transaction.
ARCHIVE has none: it writes to the store outside any transaction, then `advance_txn`."""


def step_txn(row: Retention, step: Step, *, limit: int = rules.BATCH_ROWS) -> Step | None:
    """Inside the caller's (fenced) transaction: run one transaction's worth of `step` and save where
    the deletion stands with it. Idempotent: a step that ran before deletes nothing more.

    Returns:
        The next step, or None when the run is gone.
    """
    deleted = STEPS[step](row, limit)
    following = rules.after(step, deleted=deleted, batch=limit)
    if following is not None and following != step:
        Retention.objects.filter(pk=row.pk).update(step=following)
    return following


def lock(pk: int) -> Retention | None:
    """The retention row `pk`, locked for update, if it is still there and live."""
    return (
        Retention.objects.select_for_update().filter(pk=pk, parked_at__isnull=True).first()
        if connection.features.has_select_for_update
        else Retention.objects.filter(pk=pk, parked_at__isnull=True).first()
    )
