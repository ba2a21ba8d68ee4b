"""Claiming a queued task: take the next visible row and record its start on the run, in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

from perdura import clock

from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TaskKind
from engine.matching import queue
from engine.models import Execution, Task
from engine.persistence import store
from engine.services.write_path import apply_locked, in_transaction

T = TypeVar("T")
_MAX_STALE_PER_CLAIM = 50
_DISCARDED = object()


def claim(
    namespace_id: uuid.UUID,
    kind: int,
    task_queue: str,
    start: Callable[[Execution, Mutation, Task], T],
    start_query: Callable[[Task], T] | None = None,
) -> T | queue.NotYet:
    """Claim the next visible task and apply `start` to its run, in one transaction.

    The task row is deleted in the same transaction that records the start, so a task is handed out
    at most once; a task whose run no longer expects it (StaleTask) is discarded and the next tried.
    Workflow pollers also take query tasks (`start_query`), which change nothing in the run.
    """
    kinds = [kind, TaskKind.QUERY] if start_query is not None else [kind]

    def take() -> T | queue.NotYet | object:
        task = queue.next_task(namespace_id, kinds, task_queue)
        now = clock.now()
        if task is None or task.visible_at > now:
            return queue.NotYet(task.visible_at if task is not None else None)
        if task.kind == TaskKind.QUERY:
            assert start_query is not None
            queue.delete(task)
            return start_query(task)
        execution = store.lock_execution(task.execution_id)
        if execution is None:
            queue.delete(task)
            return _DISCARDED
        try:
            result = apply_locked(execution, lambda e, m: start(e, m, task), now=now)
        except StaleTask:
            queue.delete(task)
            return _DISCARDED
        queue.delete(task)
        return result

    for _ in range(_MAX_STALE_PER_CLAIM):
        outcome = in_transaction(take)
        if outcome is not _DISCARDED:
            return outcome  # type: ignore[return-value]
    return queue.NotYet(clock.now())
