"""Query rows: requests and answers (encrypted), and the query tasks that carry them to a worker.

A query task row either waits in a task queue for a workflow poller (a query task on its own), or is
*parked* on its run (task queue `PARKED`): held for the run's workflow task, it is handed out with the
next workflow task to start and answered in that task's completion (Temporal's buffered, consistent
queries). No poller ever names the empty queue, so a parked row is never claimed on its own. When the
run no longer holds queries (see `engine.history.query_consistency`), the write that changed that releases its
parked rows to a queue, in the same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import connection
from temporalio.api.enums.v1 import QueryResultType
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import RespondQueryTaskCompletedRequest

from engine import notify
from engine.history.mutation import TaskKind
from engine.history.state import MutableState
from engine.models import Execution, Query, Task
from engine.persistence import encryption

PARKED = ""
"""The task queue of a query task held for its run's workflow task (no poller can name it)."""

CLOSED_BEFORE_TASK = "Workflow execution closed before WorkflowTaskStarted event"


def aad(namespace_id: uuid.UUID, query_id: int, part: str) -> bytes:
    return f"perdura/query/{namespace_id}/{query_id}/{part}".encode()


def create(
    *, namespace_id: uuid.UUID, execution_pk: int, query: WorkflowQuery, task_queue: str, now: datetime
) -> int:
    """A query and its task, on `task_queue` or PARKED (inside the caller's transaction); returns its id."""
    row = Query.objects.create(
        namespace_id=namespace_id, execution_id=execution_pk, request=b"", created_at=now
    )
    row.request = encryption.seal(
        namespace_id, query.SerializeToString(), aad(namespace_id, row.pk, "request")
    )
    row.save(update_fields=["request"])
    Task.objects.create(
        namespace_id=namespace_id,
        task_queue=task_queue,
        kind=TaskKind.QUERY,
        execution_id=execution_pk,
        scheduled_event_id=0,
        attempt=0,
        visible_at=now,
        query=row,
    )
    if task_queue == PARKED:
        Execution.objects.filter(pk=execution_pk, queries_parked=False).update(queries_parked=True)
    return row.pk


def request(row: Query) -> WorkflowQuery:
    return WorkflowQuery.FromString(
        encryption.unseal(row.namespace_id, row.request, aad(row.namespace_id, row.pk, "request"))
    )


def parked_ids(execution: Execution) -> list[int]:
    """The queries parked on a run, oldest first. Read only while the run's flag is up: every workflow task
    start and completion asks, and most runs are never queried while a task is in flight."""
    if not execution.queries_parked:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query_id FROM engine_task WHERE execution_id = %s AND kind = %s AND task_queue = %s "
            "ORDER BY id",
            [execution.pk, int(TaskKind.QUERY), PARKED],
        )
        return [row[0] for row in cursor.fetchall()]


def none_parked(execution: Execution) -> None:
    """The run holds no parked query any more (inside the transaction that locked it): its flag goes down."""
    if execution.queries_parked:
        Execution.objects.filter(pk=execution.pk).update(queries_parked=False)
        execution.queries_parked = False


def parked(execution: Execution) -> dict[str, WorkflowQuery]:
    """The parked queries of a run, by id: what a workflow task starting now carries to the worker."""
    ids = parked_ids(execution)
    if not ids:
        return {}
    return {str(row.pk): request(row) for row in Query.objects.filter(pk__in=ids).order_by("pk")}


def write_answer(namespace_id: uuid.UUID, query_id: int, answer: RespondQueryTaskCompletedRequest) -> bool:
    """Store a query's answer (inside the caller's transaction); False if the query is gone."""
    sealed = encryption.seal(namespace_id, answer.SerializeToString(), aad(namespace_id, query_id, "answer"))
    return Query.objects.filter(pk=query_id, namespace_id=namespace_id).update(answer=sealed) == 1


def read_answer(row: Query) -> RespondQueryTaskCompletedRequest | None:
    if row.answer is None:
        return None
    return RespondQueryTaskCompletedRequest.FromString(
        encryption.unseal(row.namespace_id, row.answer, aad(row.namespace_id, row.pk, "answer"))
    )


def unpark(query_ids: Iterable[int]) -> None:
    """The parked queries got their answers: their task rows go (inside the caller's transaction)."""
    Task.objects.filter(query_id__in=list(query_ids), task_queue=PARKED).delete()


def release(execution: Execution, state: MutableState, now: datetime) -> dict[str, int]:
    """The run stopped holding queries: send its parked ones out as query tasks; returns the wake-ups.

    They go to the sticky queue of a running sticky run (the worker holding it answers fastest; the
    waiting caller moves them on after a while) and to the normal queue otherwise, where a closed run is
    answered by replay. A run that closed before any workflow task completed has nothing to replay: its
    queries fail.
    """
    ids = parked_ids(execution)
    none_parked(execution)  # all of them leave now (or none was left: a caller gave up)
    if not ids:
        return {}
    keys = {notify.query_key(query_id): 1 for query_id in ids}
    if not state.running and not state.last_completed_wft_started_event_id:
        failed = RespondQueryTaskCompletedRequest(
            completed_type=QueryResultType.QUERY_RESULT_TYPE_FAILED, error_message=CLOSED_BEFORE_TASK
        )
        for query_id in ids:
            write_answer(execution.namespace_id, query_id, failed)
        unpark(ids)
        return keys
    queue = state.sticky_queue if state.running and state.sticky_queue else state.task_queue
    Task.objects.filter(query_id__in=ids, task_queue=PARKED).update(task_queue=queue, visible_at=now)
    keys[notify.task_queue_key(execution.namespace_id, TaskKind.WORKFLOW, queue)] = len(ids)
    return keys
