"""Claiming a queued task: take the next visible row and record its start on the run, in one transaction."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from perdura import clock

from engine import notify
from engine.history import workflow_task
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TaskKind
from engine.matching import queue
from engine.models import Execution, Task
from engine.persistence import store
from engine.services import task_routing
from engine.services.write_path import apply_locked, in_transaction

T = TypeVar("T")
_MAX_STALE_PER_CLAIM = 50
HELD_RECHECK = timedelta(milliseconds=50)
"""How soon a versioned poller looks again at a queue whose only visible task another claim holds."""


class _Discarded(enum.Enum):
    """The claim's marker for a task it dropped: try the next (a one-member enum, so the checker narrows it)."""

    DISCARDED = enum.auto()


_DISCARDED = _Discarded.DISCARDED


def claim(
    namespace_id: uuid.UUID,
    kind: int,
    task_queue: str,
    start: Callable[[Execution, Mutation, Task], T],
    start_query: Callable[[Task], T] | None = None,
    router: task_routing.Router | None = None,
) -> T | queue.NotYet:
    """Claim the next visible task and apply `start` to its run, in one transaction.

    The task row is deleted in the same transaction that records the start, so a task is handed out
    at most once; a task whose run no longer expects it (StaleTask) is discarded and the next tried.
    Workflow pollers also take query tasks (`start_query`), which change nothing in the run.
    With a `router` (worker versioning), tasks of runs routed to another version are left for their
    pollers (`skipped`), and a sticky task whose run moved to another version goes back to its normal queue.
    """
    kinds = [kind, TaskKind.QUERY] if start_query is not None else [kind]
    skipped: list[int] = []
    # A poller of no particular version takes any task: what a claim finds of the queue holds for the next
    # poll until a wake-up comes (engine/notify.py). Versioned pollers leave tasks to one another.
    key = notify.task_queue_key(namespace_id, kind, task_queue) if router is None else None
    if key is not None:
        until = notify.hub.known_empty(key, clock.now())
        if until is not None:
            return queue.NotYet(until)  # the poll looks again then, if no wake-up came first
    epoch = notify.hub.epoch(key) if key is not None else (0, 0)
    after: list[datetime | None] = [None]

    def take() -> T | queue.NotYet | _Discarded:
        task, after[0] = queue.next_task(namespace_id, kinds, task_queue, exclude=skipped)
        now = clock.now()
        if (
            task is None
            and router is not None
            and queue.held_by_another_claim(namespace_id, kinds, task_queue, exclude=skipped)
        ):
            # Both versions' pollers were woken for it; the other may be looking at it now only to leave
            # it for this one, and would not wake this one again: look again in a moment, not at the
            # 5 s re-check (what delayed the first run after a ramp on Postgres).
            return queue.NotYet(now + HELD_RECHECK)
        if task is None or task.visible_at > now:
            return queue.NotYet(task.visible_at if task is not None else None)
        if task.kind == TaskKind.QUERY:
            assert start_query is not None
            if router is not None and not _query_routed(router, task):
                skipped.append(task.pk)
                return _DISCARDED
            queue.delete(task)
            return start_query(task)
        execution = store.lock_execution(task.execution_id)
        if execution is None:
            queue.delete(task)
            return _DISCARDED
        if router is not None and task.kind == TaskKind.ACTIVITY:
            if not router.accepts_activity(store.decode_state(execution), task.task_queue):
                skipped.append(task.pk)
                return _DISCARDED
        elif router is not None and not router.accepts(store.decode_state(execution)):
            if task.task_queue != execution.task_queue:
                apply_locked(execution, lambda _e, m: workflow_task.unstick(m), now=now)
                queue.delete(task)
            else:
                skipped.append(task.pk)
            return _DISCARDED
        try:
            # The task row goes in the statement that records the start (on Postgres).
            return apply_locked(execution, lambda e, m: start(e, m, task), now=now, claimed_task=task.pk)
        except StaleTask:
            queue.delete(task)
            return _DISCARDED

    for _ in range(_MAX_STALE_PER_CLAIM):
        outcome = in_transaction(take)
        if outcome is _DISCARDED:
            continue
        if key is not None:
            # Committed: nothing else was visible when it read the queue (a task taken now leaves `after`).
            # A queue whose next task is later is as empty until then.
            visible_at = outcome.visible_at if isinstance(outcome, queue.NotYet) else after[0]
            now = clock.now()
            if visible_at is None or visible_at > now:
                notify.hub.mark_empty(key, epoch, visible_at, now)
        return outcome
    # Only tasks for other versions may be left: wait for a wake-up (a routing change wakes the queue).
    return queue.NotYet(None if skipped else clock.now())


def _query_routed(router: task_routing.Router, task: Task) -> bool:
    """A query goes to the pollers its run is routed to; on a sticky queue of another version, it moves."""
    execution = task.execution
    if router.accepts(store.decode_state(execution)):
        return True
    if task.task_queue != execution.task_queue:
        Task.objects.filter(pk=task.pk).update(task_queue=execution.task_queue)
        notify.publish_on_commit(
            {notify.task_queue_key(task.namespace_id, TaskKind.WORKFLOW, execution.task_queue): 1}
        )
    return False
