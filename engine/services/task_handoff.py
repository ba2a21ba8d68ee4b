"""Handing a new task to a poll waiting in this process, in the transaction that makes it (sync match).

Without it, a task made while a worker's poll waits costs two transactions: the one that writes its row
and wakes the poll, and the poll's claim, which reads the row back, locks and decodes the run again, records
the start and deletes the row. Here the transaction that makes the task also records its start, for a poll
of this process that is waiting on the task's queue and stands ready (`notify.Waiter.offer`); the task's row
is never written, and the poll gets its answer once that transaction commits. Temporal's matching service
calls this a sync match; its history shows the same events.

Only polls of no worker version take tasks this way, in a namespace known to have no deployments (no
routing to decide), and only at the top of a transaction of `write_path.in_transaction` that is not nested
in another (so its commit is the one that makes the start durable). As with a claim, a poll whose caller
goes away between the start and its answer loses the task until its timeout starts it again.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.db import connection

from engine import notify
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TaskKind
from engine.models import Execution
from engine.services import task_routing

_KINDS = (TaskKind.WORKFLOW, TaskKind.ACTIVITY)
_taken: contextvars.ContextVar[list[tuple[notify.Waiter, Any]] | None] = contextvars.ContextVar(
    "perdura_handoffs", default=None
)
"""The polls the current transaction started tasks for, with their answers (None: no handoff here)."""


@contextlib.contextmanager
def transaction_scope() -> Iterator[None]:
    """Wrap one outermost transaction (enter it before `transaction.atomic()`): once it commits, the polls it
    started tasks for get their answers; if it does not, they wait as before."""
    if connection.in_atomic_block:  # nested: its commit is not ours to see
        yield
        return
    taken: list[tuple[notify.Waiter, Any]] = []
    token = _taken.set(taken)
    try:
        yield
    except BaseException:
        for waiter, _ in taken:
            waiter.release()
        raise
    finally:
        _taken.reset(token)
    for waiter, answer in taken:
        waiter.hand(answer)


@contextlib.contextmanager
def handing_over(execution: Execution, m: Mutation) -> Iterator[None]:
    """Around the write of `m` (not yet persisted) on `execution`: first start its new tasks that a waiting
    poll of this process can take, for that poll (`hand_over`); their rows are then not written."""
    mine = hand_over(execution, m)
    try:
        yield
    except BaseException:
        abandon(mine)
        raise
    persisted(mine)


def hand_over(execution: Execution, m: Mutation) -> list[tuple[notify.Waiter, Any]]:
    """Start the mutation's new tasks that a waiting poll of this process can take, for that poll, in `m`
    (their rows are then not written). Call before persisting `m`; pass what it returns to `persisted`
    once `m` is written, or to `abandon` if it is not (`handing_over` does both)."""
    taken = _taken.get()
    if taken is None or not m.tasks or m.closed or connection.savepoint_ids:
        return []
    if not task_routing.unversioned_known(execution.namespace_id):
        return []
    mine: list[tuple[notify.Waiter, Any]] = []
    for task in list(m.tasks):
        if task.kind not in _KINDS or task.visible_at > m.now:
            continue
        waiter = notify.hub.reserve(
            notify.task_queue_key(execution.namespace_id, int(task.kind), task.task_queue)
        )
        if waiter is None:
            continue
        assert waiter.offer is not None
        try:
            answer = waiter.offer(execution, m, task)
        except StaleTask:  # raised before the rules change anything: the task is queued as usual
            waiter.release()
            continue
        except BaseException:
            waiter.release()
            abandon(mine)
            raise
        m.drop_task(task.kind, task.scheduled_event_id)
        mine.append((waiter, answer))
    return mine


def persisted(mine: list[tuple[notify.Waiter, Any]]) -> None:
    """`hand_over`'s mutation is written: its polls get their answers when the transaction commits."""
    taken = _taken.get()
    assert taken is not None or not mine
    if taken is not None:
        taken.extend(mine)


def abandon(mine: list[tuple[notify.Waiter, Any]]) -> None:
    """`hand_over`'s mutation was not written: its polls wait as before."""
    for waiter, _ in mine:
        waiter.release()
