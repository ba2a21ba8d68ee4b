"""Retention rows on disk: created when a run closes, probed per shard, and the run's bounded deletes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection

from engine.history import retention as rules
from engine.history.retention import Step
from engine.models import Execution, Retention
from engine.persistence import visibility
from tenants import archival
from visibility.backends import backend
from visibility.backends.sql import records
from visibility.models import VisibilityRecord


def schedule_txn(execution: Execution, close_time: datetime) -> None:
    """Inside the transaction closing `execution` (after its visibility record was written): its
    retention row, due at close + the namespace's retention in force now (a later change of retention
    leaves it as it is, as in Temporal); and when the namespace archives visibility, the run's record
    copied to the archive index, where it stays after the run is deleted."""
    # Hand-written SQL: every close passes here, and the ORM's query building cost more than the queries.
    namespace = records.db_uuid(_uuid(execution.namespace_id), connection)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT retention, visibility_archival_state, visibility_archival_uri FROM tenants_namespace "
            "WHERE id = %s",
            [namespace],
        )
        retention, archive_state, archive_uri = cursor.fetchone()
        if not isinstance(retention, timedelta):  # SQLite keeps a duration as microseconds
            retention = timedelta(microseconds=retention)
        if archive_state == archival.State.ENABLED and archive_uri:
            records.archive_copy_txn(execution.pk, archive_uri)
        due_at = rules.due_at(close_time, rules.effective(retention))
        # One row per run, whoever wrote it first (a backfill, a retried close).
        cursor.execute(
            "INSERT INTO engine_retention (failures, last_error, parked_at, shard, due_at, execution_id, "
            "namespace_id, step) VALUES (0, '', NULL, %s, %s, %s, %s, 0) ON CONFLICT DO NOTHING",
            [execution.shard, connection.ops.adapt_datetimefield_value(due_at), execution.pk, namespace],
        )


def _uuid(value: object) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


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


GROUP_ROWS = 5000
"""Rows one statement of a group's deletion removes at most (engine/shards/retention.py deletes the runs
of up to a hundred retention rows together): a group of long histories goes in several transactions."""


def _marks(values: list[int]) -> str:
    return ", ".join(["%s"] * len(values))


def _delete_some(table: str, executions: list[int], limit: int, extra: str = "") -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} "
            f"WHERE execution_id IN ({_marks(executions)}){extra} ORDER BY id LIMIT %s)",
            [*executions, limit],
        )
        return cursor.rowcount


def _visibility(rows: list[Retention], limit: int) -> int:
    executions = [r.execution_id for r in rows]
    VisibilityRecord.objects.filter(execution_id__in=executions).delete()
    # Index rows of the runs are moot now; a processor holding one finds no record and drops it.
    return _delete_some("engine_transfer", executions, limit, " AND kind = 7")


def _run(rows: list[Retention], limit: int) -> int:
    executions = [r.execution_id for r in rows]
    marks = _marks(executions)
    with connection.cursor() as cursor:
        # The current-run entry only where it is still the run's (not a newer run of the workflow id).
        cursor.execute(
            "DELETE FROM engine_currentrun WHERE (namespace_id, workflow_id, run_id) IN "
            f"(SELECT namespace_id, workflow_id, run_id FROM engine_execution WHERE id IN ({marks}))",
            executions,
        )
        Retention.objects.filter(pk__in=[r.pk for r in rows]).delete()
        # The runs' rows last, and without Django's cascade: a table added later that still holds a row
        # of a run fails this transaction (a deferred foreign key) instead of being emptied unnoticed.
        cursor.execute(f"DELETE FROM engine_execution WHERE id IN ({marks})", executions)
        return cursor.rowcount


def _table(table: str) -> Callable[[list[Retention], int], int]:
    return lambda rows, limit: _delete_some(table, [r.execution_id for r in rows], limit)


STEPS: dict[Step, Callable[[list[Retention], int], int]] = {
    Step.VISIBILITY: _visibility,
    Step.HISTORY: _table("engine_historybatch"),
    Step.TASKS: _table("engine_task"),
    Step.QUERIES: _table("engine_query"),
    Step.TIMERS: _table("engine_timer"),
    Step.TRANSFERS: _table("engine_transfer"),
    Step.RUN: _run,
}
"""One handler per deletion step: delete at most `limit` rows of the runs of `rows` (one run's, or a
group's), inside the caller's transaction. ARCHIVE has none: it writes to the store outside any
transaction, then `advance_txn`."""


def advance_txn(pks: list[int], step: Step) -> None:
    """Inside the caller's (fenced) transaction: the rows' retention goes on at `step` (the ARCHIVE step
    ends here, its archive written and verified outside: engine/shards/retention.py)."""
    Retention.objects.filter(pk__in=pks).update(step=step)


def step_txn(row: Retention, step: Step, *, limit: int = rules.BATCH_ROWS) -> Step | None:
    """Inside the caller's (fenced) transaction: run one transaction's worth of `step` and save where
    the deletion stands with it. Idempotent: a step that ran before deletes nothing more.

    Returns:
        The next step, or None when the run is gone.
    """
    deleted = STEPS[step]([row], limit)
    following = rules.after(step, deleted=deleted, batch=limit)
    if following is not None and following != step:
        Retention.objects.filter(pk=row.pk).update(step=following)
    return following


def group_txn(rows: list[Retention], step: Step, *, limit: int = GROUP_ROWS) -> Step | None:
    """Inside the caller's (fenced) transaction: the deletion steps from `step` on, for the runs of all
    `rows` together, as far as one transaction goes. Idempotent, as `step_txn`.

    Returns:
        None when the runs and rows are gone; else the step a table stopped at with `limit` rows deleted
        (saved on every row: the next transaction goes on from there).
    """
    current: Step | None = step
    while current is not None:
        deleted = STEPS[current](rows, limit)
        following = rules.after(current, deleted=deleted, batch=limit)
        if following == current:
            Retention.objects.filter(pk__in=[r.pk for r in rows]).update(step=current)
            return current
        current = following
    return None


def lock_group(pks: list[int], now: datetime) -> list[Retention]:
    """The retention rows of `pks` still live and due by `now`, locked for update, in id order."""
    rows = Retention.objects.filter(pk__in=pks, parked_at__isnull=True, due_at__lte=now).order_by("pk")
    return list(rows.select_for_update() if connection.features.has_select_for_update else rows)


def live(pks: list[int]) -> list[Retention]:
    """The retention rows of `pks` still live (unlocked, in id order)."""
    return list(Retention.objects.filter(pk__in=pks, parked_at__isnull=True).order_by("pk"))


def lock(pk: int) -> Retention | None:
    """The retention row `pk`, locked for update, if it is still there and live."""
    return (
        Retention.objects.select_for_update().filter(pk=pk, parked_at__isnull=True).first()
        if connection.features.has_select_for_update
        else Retention.objects.filter(pk=pk, parked_at__isnull=True).first()
    )
