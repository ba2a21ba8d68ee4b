"""Task-queue rows: the next visible task of a queue (locked), its removal, and the backlog a queue holds."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from perdura import clock

from engine.models import Task
from engine.persistence import model_rows, store


@dataclass(frozen=True, slots=True)
class NotYet:
    """No task could be claimed; `visible_at` says when the earliest one becomes visible (None: queue empty)."""

    visible_at: datetime | None


def next_task(
    namespace_id: uuid.UUID, kinds: list[int], task_queue: str, exclude: list[int] | None = None
) -> tuple[Task | None, datetime | None]:
    """The queue's earliest task, locked, and when the queue's next other task becomes visible (None: it has no
    other). Rows other pollers hold are skipped (Postgres) but count as other tasks, and so do `exclude`d
    ones (tasks this claim already found to be for another worker version)."""
    lock = " FOR UPDATE OF t SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    namespace = store.uuid_param(namespace_id)
    excluded = " AND t.id NOT IN (" + ", ".join(["%s"] * len(exclude)) + ")" if exclude else ""
    # One index probe per kind: a MIN over `kind IN (...)` would read the whole backlog.
    after = ", ".join(
        f"(SELECT MIN(o.visible_at) FROM engine_task o WHERE o.namespace_id = t.namespace_id AND o.kind = {int(k)}"
        f" AND o.task_queue = t.task_queue AND o.id <> t.id) AS after_{int(k)}"
        for k in kinds
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {model_rows.columns(Task, 't')}, {after} FROM engine_task t WHERE t.namespace_id = %s "
            "AND t.kind IN ("
            + ", ".join(["%s"] * len(kinds))
            + ") AND t.task_queue = %s"
            + excluded
            + " ORDER BY t.visible_at, t.id LIMIT 1"
            + lock,
            [namespace, *kinds, task_queue, *(exclude or [])],
        )
        row = cursor.fetchone()
    if row is None:
        return None, None
    task = model_rows.instance(Task, row)
    found = [_datetime(value) for value in row[-len(kinds) :]]
    return task, min((at for at in found if at is not None), default=None)


def _datetime(value: datetime | str | None) -> datetime | None:
    if isinstance(value, str):  # SQLite returns aggregates of datetime columns as text
        value = datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def held_by_another_claim(
    namespace_id: uuid.UUID, kinds: list[int], task_queue: str, exclude: list[int] | None = None
) -> bool:
    """Whether a visible task `next_task` skipped because another claim holds its row (Postgres only: on
    SQLite claims take turns). That claim may be a poller of another worker version that will leave it."""
    if not connection.features.has_select_for_update_skip_locked:
        return False
    excluded = " AND id NOT IN (" + ", ".join(["%s"] * len(exclude)) + ")" if exclude else ""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM engine_task WHERE namespace_id = %s AND kind IN ("
            + ", ".join(["%s"] * len(kinds))
            + ") AND task_queue = %s AND visible_at <= %s"
            + excluded
            + " LIMIT 1",
            [store.uuid_param(namespace_id), *kinds, task_queue, clock.now(), *(exclude or [])],
        )
        return cursor.fetchone() is not None


def delete(task: Task) -> None:
    """Remove a claimed (or discarded) task row, inside the claiming transaction."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM engine_task WHERE id = %s", [task.pk])


@dataclass(frozen=True, slots=True)
class Backlog:
    """Tasks waiting in a queue that a poller could take now, and when the oldest became takeable."""

    count: int
    oldest_visible_at: datetime | None


def backlog(namespace_id: uuid.UUID, kind: int, task_queue: str) -> Backlog:
    """The visible backlog of one queue (DescribeTaskQueue stats); uses the claim index."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*), MIN(visible_at) FROM engine_task "
            "WHERE namespace_id = %s AND kind = %s AND task_queue = %s AND visible_at <= %s",
            [
                store.uuid_param(namespace_id),
                kind,
                task_queue,
                connection.ops.adapt_datetimefield_value(clock.now()),
            ],
        )
        count, oldest = cursor.fetchone()
    return Backlog(count=count, oldest_visible_at=_datetime(oldest))
