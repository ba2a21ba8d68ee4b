"""Queries: held for the run's workflow task or sent to a worker as a query task; the answer written back.

Nothing here writes history: a query only reads the run (DESIGN.md flows). A query arriving while the
run has a workflow task scheduled or running is *consistent*, as in Temporal: it is parked on the run
and handed out with the next workflow task to start (PollWorkflowTaskQueueResponse.queries), and the
worker answers it in that task's completion (query_results). If the task ends without a successor,
the run's next write releases the parked query as a query task (engine.persistence.query_rows). Requests
and answers live in Query rows, so the caller waiting for an answer may be served by another process
than the poller or the completion; wake-ups (query keys) travel like every other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from perdura import clock
from temporalio.api.enums.v1 import (
    QueryRejectCondition,
    QueryResultType,
    ResourceExhaustedCause,
    ResourceExhaustedScope,
    WorkflowExecutionStatus,
)
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure, WorkflowNotReadyFailure
from temporalio.api.query.v1 import WorkflowQuery, WorkflowQueryResult
from temporalio.api.workflowservice.v1 import RespondQueryTaskCompletedRequest

from engine import notify, validation
from engine.errors import FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted
from engine.history import query_consistency as rules
from engine.history.mutation import TaskKind
from engine.history.state import MutableState
from engine.models import Execution, Query, Task
from engine.persistence import query_rows as rows
from engine.persistence import store
from tenants.models import Namespace

COMPLETED = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
BUFFER_FULL = (
    "consistent query buffer is full, this may be caused by too many queries and workflow not able to "
    "process query fast enough"
)


@dataclass(frozen=True, slots=True)
class Rejected:
    """The reject condition matched: the run's status, no query sent."""

    status: int


@dataclass(frozen=True, slots=True)
class Submitted:
    query_id: int
    task_queue: str
    """The run's normal task queue (a query left unclaimed on the sticky queue moves there)."""


@dataclass(frozen=True, slots=True)
class QueryStatus:
    answer: RespondQueryTaskCompletedRequest | None
    task_queue: str | None
    """Where its task waits: a queue name, PARKED (held for the run's workflow task), or None (claimed)."""


@dataclass(frozen=True, slots=True)
class StartedQuery:
    """A query task handed to a workflow poller; the history is read after the claim commits."""

    query_id: int
    execution: Execution
    state: MutableState
    query: WorkflowQuery
    first_event_id: int


def _not_ready(message: str) -> FailedPrecondition:
    return FailedPrecondition(message, WorkflowNotReadyFailure())


def _rejected(state: MutableState, condition: int) -> bool:
    status = state.status
    if state.paused:
        return True  # a paused run answers no query, whatever the condition (Temporal's QueryRejected PAUSED)
    if state.running or condition == QueryRejectCondition.QUERY_REJECT_CONDITION_NONE:
        return False
    return condition == QueryRejectCondition.QUERY_REJECT_CONDITION_NOT_OPEN or (
        condition == QueryRejectCondition.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY and status != COMPLETED
    )


def query_submit(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    query: WorkflowQuery,
    reject_condition: int,
    wait: timedelta,
) -> Rejected | Submitted:
    """Admit a query: park it on the run or queue it for a worker, under the run's lock.

    The lock orders it against the run's writes: a workflow task completing either sees the parked
    query (and answers or releases it) or finished before it, in which case the query goes out now.
    No state or history is written. `wait` is how long the caller will wait for the answer.

    Raises:
        NotFound: no such run.
        FailedPrecondition: (WorkflowNotReady) the run closed before any workflow task, its workflow
            task keeps failing, or its first workflow task will not start within `wait`.
        ResourceExhausted: a query is already held for the run's workflow task.
    """
    with transaction.atomic():
        execution = store.find_execution(namespace.id, workflow_id, run_id, lock=True)
        state = store.decode_state(execution)
        if _rejected(state, reject_condition):
            return Rejected(status=state.status)
        if not state.running and not state.last_completed_wft_started_event_id:
            raise _not_ready(rows.CLOSED_BEFORE_TASK)
        if state.running and rules.task_attempt(state) >= rules.FAILED_TASK_ATTEMPT:
            raise _not_ready("Unable to query workflow due to Workflow Task in failed state.")
        now = clock.now()
        if rules.holds_queries(state):
            if state.workflow_task is None and state.execution_time > now + wait:
                raise _not_ready("Workflow task is not scheduled yet.")
            if len(rows.parked_ids(execution)) >= rules.MAX_BUFFERED_QUERIES:
                raise ResourceExhausted(
                    BUFFER_FULL,
                    ResourceExhaustedFailure(
                        cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW,
                        scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
                    ),
                )
            queue = rows.PARKED
        else:
            queue = state.sticky_queue if state.running and state.sticky_queue else state.task_queue
        query_id = rows.create(
            namespace_id=namespace.id, execution_pk=execution.pk, query=query, task_queue=queue, now=now
        )
        if queue != rows.PARKED:
            notify.publish_on_commit({notify.task_queue_key(namespace.id, TaskKind.WORKFLOW, queue): 1})
    return Submitted(query_id=query_id, task_queue=state.task_queue)


def query_started(task: Task, *, sticky: bool) -> StartedQuery:
    """Called by the claim of a query task (its row already deleted in the same transaction)."""
    assert task.query_id is not None  # a query task names its query
    row = Query.objects.select_related("execution").get(pk=task.query_id)
    execution = row.execution
    state = store.decode_state(execution)
    previous = state.last_completed_wft_started_event_id
    return StartedQuery(
        query_id=row.pk,
        execution=execution,
        state=state,
        query=rows.request(row),
        first_event_id=previous + 1 if sticky and previous else 1,
    )


def query_answer(*, namespace: Namespace, query_id: int, answer: RespondQueryTaskCompletedRequest) -> None:
    """Store the worker's answer to a query task and wake the caller waiting for it.

    Raises:
        NotFound: the query is gone (its caller gave up).
    """
    with transaction.atomic():
        if not rows.write_answer(namespace.id, query_id, answer):
            raise NotFound("query task not found, or already expired")
        notify.publish_on_commit({notify.query_key(query_id): 1})


def _answer_of(result: WorkflowQueryResult) -> RespondQueryTaskCompletedRequest:
    try:
        validation.blob_size(result.answer if result.HasField("answer") else None, "query result")
    except InvalidArgument as error:
        return RespondQueryTaskCompletedRequest(
            completed_type=QueryResultType.QUERY_RESULT_TYPE_FAILED, error_message=error.message
        )
    return RespondQueryTaskCompletedRequest(
        completed_type=result.result_type,
        query_result=result.answer if result.HasField("answer") else None,
        error_message=result.error_message,
        failure=result.failure if result.HasField("failure") else None,
    )


def attached_answers(execution: Execution, results: Mapping[str, WorkflowQueryResult]) -> None:
    """The answers a workflow task completion carried for the queries parked on its run.

    Inside the completion's transaction (the run is locked). Answers to queries not parked on this run
    (gone, or never handed out with it) are ignored; parked queries left unanswered stay parked.
    """
    if not results:
        return
    parked = set(rows.parked_ids(execution))
    answered = []
    for key, result in results.items():
        query_id = int(key) if key.isdigit() else 0
        if query_id in parked and rows.write_answer(execution.namespace_id, query_id, _answer_of(result)):
            answered.append(query_id)
    if answered:
        rows.unpark(answered)
        if parked.issubset(answered):
            rows.none_parked(execution)
        notify.publish_on_commit({notify.query_key(query_id): 1 for query_id in answered})


def query_status(query_id: int) -> QueryStatus:
    """The answer, if any, and where the query's task waits."""
    row = Query.objects.filter(pk=query_id).first()
    if row is None:
        return QueryStatus(answer=None, task_queue=None)
    answer = rows.read_answer(row)
    if answer is not None:
        return QueryStatus(answer=answer, task_queue=None)
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_queue FROM engine_task WHERE query_id = %s", [query_id])
        found = cursor.fetchone()
    return QueryStatus(answer=None, task_queue=found[0] if found else None)


def query_move(query_id: int, *, namespace: Namespace, from_queue: str, task_queue: str) -> None:
    """The sticky worker did not take it: offer the query on the normal queue instead."""
    with transaction.atomic():
        moved = Task.objects.filter(query_id=query_id, task_queue=from_queue).update(task_queue=task_queue)
        if moved:
            notify.publish_on_commit({notify.task_queue_key(namespace.id, TaskKind.WORKFLOW, task_queue): 1})


def query_finish(query_id: int) -> None:
    """The caller is done (answered or gave up): the query and any unclaimed or parked task go."""
    Query.objects.filter(pk=query_id).delete()
