"""Task-queue rows: the next visible task of a queue (locked), its removal, and the backlog a queue holds."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from perdura import clock

from engine.models import Task
from engine.persistence import store


@dataclass(frozen=True, slots=True)
class NotYet:
    """No task could be claimed; `visible_at` says when the earliest one becomes visible (None: queue empty)."""

    visible_at: datetime | None


def next_task(
    namespace_id: uuid.UUID, kinds: list[int], task_queue: str, exclude: list[int] | None = None
) -> Task | None:
    """The queue's earliest task, locked; rows other pollers hold are skipped (Postgres), and `exclude`d ones
    (tasks this claim already found to be for another worker version)."""
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    namespace = store.uuid_param(namespace_id)
    excluded = " AND id NOT IN (" + ", ".join(["%s"] * len(exclude)) + ")" if exclude else ""
    rows = list(
        Task.objects.raw(
            "SELECT * FROM engine_task WHERE namespace_id = %s AND kind IN ("
            + ", ".join(["%s"] * len(kinds))
            + ") AND task_queue = %s"
            + excluded
            + " ORDER BY visible_at, id LIMIT 1"
            + lock,
            [namespace, *kinds, task_queue, *(exclude or [])],
        )
    )
    return rows[0] if rows else None


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
    if isinstance(oldest, str):  # SQLite returns aggregates of datetime columns as text
        oldest = datetime.fromisoformat(oldest)
    if oldest is not None and oldest.tzinfo is None:
        oldest = oldest.replace(tzinfo=UTC)
    return Backlog(count=count, oldest_visible_at=oldest)
