"""Task-queue rows: find the next visible task and claim it together with the run it belongs to."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from django.db import connection, transaction
from perdura import clock

from engine import ids
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TaskKind
from engine.models import Execution, Task
from engine.persistence import store

T = TypeVar("T")
_MAX_STALE_PER_CLAIM = 50


@dataclass(frozen=True, slots=True)
class NotYet:
    """No task could be claimed; `visible_at` says when the earliest one becomes visible (None: queue empty)."""

    visible_at: datetime | None


def _next_task(namespace_id: uuid.UUID, kinds: list[int], task_queue: str) -> Task | None:
    """The queue's earliest task, locked; rows other pollers hold are skipped (Postgres)."""
    lock = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    namespace = store.uuid_param(namespace_id)
    rows = list(
        Task.objects.raw(
            "SELECT * FROM engine_task WHERE namespace_id = %s AND kind IN ("
            + ", ".join(["%s"] * len(kinds))
            + ") AND task_queue = %s ORDER BY visible_at, id LIMIT 1"
            + lock,
            [namespace, *kinds, task_queue],
        )
    )
    return rows[0] if rows else None


def _delete(task: Task) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM engine_task WHERE id = %s", [task.pk])


def claim(
    namespace_id: uuid.UUID,
    kind: int,
    task_queue: str,
    start: Callable[[Execution, Mutation, Task], T],
    start_query: Callable[[Task], T] | None = None,
) -> T | NotYet:
    """Claim the next visible task and apply `start` to its run, in one transaction.

    The task row is deleted in the same transaction that records the start, so a task is handed out
    at most once; a task whose run no longer expects it (StaleTask) is discarded and the next tried.
    Workflow pollers also take query tasks (`start_query`), which change nothing in the run.
    """
    kinds = [kind, TaskKind.QUERY] if start_query is not None else [kind]
    for _ in range(_MAX_STALE_PER_CLAIM):
        with transaction.atomic():
            task = _next_task(namespace_id, kinds, task_queue)
            now = clock.now()
            if task is None or task.visible_at > now:
                return NotYet(task.visible_at if task is not None else None)
            if task.kind == TaskKind.QUERY:
                assert start_query is not None
                _delete(task)
                return start_query(task)
            execution = store.lock_execution(task.execution_id)
            if execution is None:
                _delete(task)
                continue
            m = Mutation(store.decode_state(execution), now, ids.SYSTEM)
            try:
                result = start(execution, m, task)
            except StaleTask:
                _delete(task)
                continue
            store.persist(execution, m)
            _delete(task)
            return result
    return NotYet(clock.now())


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
