"""Task-queue rows: find the next visible task and claim it together with the run it belongs to."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.db import transaction
from django.db.models import Min
from perdura import clock

from engine.history.errors import StaleTask
from engine.history.mutation import Mutation
from engine.models import Execution, Task
from engine.persistence import store

T = TypeVar("T")
_MAX_STALE_PER_CLAIM = 50


def next_visible(namespace_id: uuid.UUID, kind: int, task_queue: str) -> datetime | None:
    """When the earliest task of the queue becomes visible (None if the queue is empty). A cheap read."""
    return Task.objects.filter(namespace_id=namespace_id, kind=kind, task_queue=task_queue).aggregate(
        first=Min("visible_at")
    )["first"]


def claim(
    namespace_id: uuid.UUID,
    kind: int,
    task_queue: str,
    start: Callable[[Execution, Mutation, Task], T],
) -> T | None:
    """Claim the next visible task and apply `start` to its run, in one transaction.

    The task row is deleted in the same transaction that records the start, so a task is handed out
    at most once; a task whose run no longer expects it (StaleTask) is discarded and the next tried.
    """
    for _ in range(_MAX_STALE_PER_CLAIM):
        with transaction.atomic():
            task = (
                Task.objects.select_for_update(skip_locked=True)
                .filter(
                    namespace_id=namespace_id, kind=kind, task_queue=task_queue, visible_at__lte=clock.now()
                )
                .order_by("visible_at", "id")
                .first()
            )
            if task is None:
                return None
            execution = Execution.objects.select_for_update().get(pk=task.execution_id)
            m = Mutation(store.decode_state(execution), clock.now())
            try:
                result = start(execution, m, task)
            except StaleTask:
                task.delete()
                continue
            store.persist(execution, m)
            task.delete()
            return result
    return None
