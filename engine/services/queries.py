"""Queries: a request row a workflow poller picks up, and the worker's answer written back to it.

Nothing here writes history: a query only reads the run (DESIGN.md flows). The request and the
answer are encrypted like everything else that carries payloads.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from perdura import clock
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import RespondQueryTaskCompletedRequest

from engine import notify
from engine.errors import NotFound
from engine.history.mutation import TaskKind
from engine.history.state import MutableState
from engine.models import Execution, Query, Task
from engine.persistence import encryption, store
from tenants.models import Namespace


def _aad(query: Query, part: str) -> bytes:
    return f"perdura/query/{query.namespace_id}/{query.pk}/{part}".encode()


@dataclass(frozen=True, slots=True)
class StartedQuery:
    """A query task handed to a workflow poller; the history is read after the claim commits."""

    query_id: int
    execution: Execution
    state: MutableState
    query: WorkflowQuery
    first_event_id: int


def query_dispatch(
    *, namespace: Namespace, execution: Execution, query: WorkflowQuery, task_queue: str
) -> int:
    """Queue a query task for the run's workers on `task_queue`; returns the query id."""
    with transaction.atomic():
        row = Query.objects.create(
            namespace=namespace, execution=execution, request=b"", created_at=clock.now()
        )
        row.request = encryption.seal(namespace.id, query.SerializeToString(), _aad(row, "request"))
        row.save(update_fields=["request"])
        Task.objects.create(
            namespace=namespace,
            task_queue=task_queue,
            kind=TaskKind.QUERY,
            execution=execution,
            scheduled_event_id=0,
            attempt=0,
            visible_at=clock.now(),
            query=row,
        )
        notify.publish_on_commit({notify.task_queue_key(namespace.id, TaskKind.WORKFLOW, task_queue): 1})
    return row.pk


def query_started(task: Task, *, sticky: bool) -> StartedQuery:
    """Called by the claim of a query task (its row already deleted in the same transaction)."""
    row = Query.objects.select_related("execution").get(pk=task.query_id)
    execution = row.execution
    state = store.decode_state(execution)
    query = WorkflowQuery.FromString(encryption.unseal(row.namespace_id, row.request, _aad(row, "request")))
    previous = state.last_completed_wft_started_event_id
    return StartedQuery(
        query_id=row.pk,
        execution=execution,
        state=state,
        query=query,
        first_event_id=previous + 1 if sticky and previous else 1,
    )


def query_answer(*, namespace: Namespace, query_id: int, answer: RespondQueryTaskCompletedRequest) -> None:
    """Store the worker's answer and wake the caller waiting for it.

    Raises:
        NotFound: the query is gone (its caller gave up).
    """
    with transaction.atomic():
        row = Query.objects.select_for_update().filter(pk=query_id, namespace=namespace).first()
        if row is None:
            raise NotFound("query task not found, or already expired")
        row.answer = encryption.seal(namespace.id, answer.SerializeToString(), _aad(row, "answer"))
        row.save(update_fields=["answer"])
        notify.publish_on_commit({notify.query_key(query_id): 1})


def query_result(query_id: int) -> RespondQueryTaskCompletedRequest | None:
    row = Query.objects.filter(pk=query_id).first()
    if row is None or row.answer is None:
        return None
    return RespondQueryTaskCompletedRequest.FromString(
        encryption.unseal(row.namespace_id, row.answer, _aad(row, "answer"))
    )


def query_unclaimed(query_id: int) -> bool:
    return Task.objects.filter(query_id=query_id).exists()


def query_move(query_id: int, *, namespace: Namespace, task_queue: str) -> None:
    """The sticky worker did not take it: offer the query on the normal queue instead."""
    with transaction.atomic():
        Task.objects.filter(query_id=query_id).update(task_queue=task_queue)
        notify.publish_on_commit({notify.task_queue_key(namespace.id, TaskKind.WORKFLOW, task_queue): 1})


def query_finish(query_id: int) -> None:
    """The caller is done (answered or gave up): the query and any unclaimed task go."""
    Query.objects.filter(pk=query_id).delete()
