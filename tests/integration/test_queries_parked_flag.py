"""A run's `queries_parked` flag (engine/persistence/query_rows.py): up from the first query parked on the run
until none is, and the run's workflow tasks look for parked queries only while it is up."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from temporalio.api.common.v1 import Payload, Payloads, WorkflowType
from temporalio.api.enums.v1 import QueryResultType
from temporalio.api.query.v1 import WorkflowQuery, WorkflowQueryResult
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    RespondWorkflowTaskCompletedRequest,
    StartWorkflowExecutionRequest,
)

from engine import tokens
from engine.models import Execution
from engine.services import workflow_queries, workflow_tasks, workflows
from tenants.services.namespaces import namespace_register

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PARKED_READ = "SELECT query_id FROM engine_task"


def _token(namespace, started: workflow_tasks.StartedWorkflowTask) -> tokens.TaskToken:
    return tokens.TaskToken(
        namespace_id=str(namespace.id),
        workflow_id=started.execution.workflow_id,
        run_id=started.execution.run_id,
        scheduled_event_id=started.scheduled_event_id,
        attempt=started.attempt,
        started_event_id=started.started_event_id,
    )


def _started_run():
    """A new namespace's run whose first workflow task waits on its own queue."""
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    queue = f"tq-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=queue),
    )
    workflows.workflow_start(namespace=namespace, request=request)
    return namespace, queue, request


def _parked_reads(captured: CaptureQueriesContext) -> int:
    return sum(PARKED_READ in q["sql"] for q in captured.captured_queries)


def test_a_run_nobody_queries_reads_no_parked_queries_and_a_parked_query_rides_the_next_task():
    namespace, queue, request = _started_run()

    with CaptureQueriesContext(connection) as captured:
        started = workflow_tasks.poll_once(
            namespace=namespace, task_queue=queue, identity="w", request_id="r1"
        )
        assert isinstance(started, workflow_tasks.StartedWorkflowTask)
        workflow_tasks.workflow_task_complete(
            namespace=namespace,
            token=_token(namespace, started),
            request=RespondWorkflowTaskCompletedRequest(force_create_new_workflow_task=True),
        )
    assert _parked_reads(captured) == 0  # the start and the completion both skipped the read
    run = Execution.objects.get(pk=started.execution.pk)
    assert not run.queries_parked

    # A workflow task is scheduled: the query is parked, and the flag goes up with it.
    submitted = workflow_queries.query_submit(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=run.run_id,
        query=WorkflowQuery(query_type="state"),
        reject_condition=0,
        wait=timedelta(seconds=10),
    )
    assert isinstance(submitted, workflow_queries.Submitted)
    run.refresh_from_db()
    assert run.queries_parked

    started = workflow_tasks.poll_once(namespace=namespace, task_queue=queue, identity="w", request_id="r2")
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    assert list(started.queries) == [str(submitted.query_id)]
    run.refresh_from_db()
    assert run.queries_parked  # handed out, not yet answered

    answer = WorkflowQueryResult(
        result_type=QueryResultType.QUERY_RESULT_TYPE_ANSWERED,
        answer=Payloads(payloads=[Payload(data=b'"ok"')]),
    )
    workflow_tasks.workflow_task_complete(
        namespace=namespace,
        token=_token(namespace, started),
        request=RespondWorkflowTaskCompletedRequest(query_results={str(submitted.query_id): answer}),
    )
    run.refresh_from_db()
    assert not run.queries_parked
    status = workflow_queries.query_status(submitted.query_id)
    assert status.answer is not None
    assert status.answer.query_result.payloads[0].data == b'"ok"'


def test_a_parked_query_left_unanswered_is_released_and_the_flag_goes_down():
    namespace, queue, request = _started_run()
    started = workflow_tasks.poll_once(namespace=namespace, task_queue=queue, identity="w", request_id="r1")
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    workflow_tasks.workflow_task_complete(
        namespace=namespace,
        token=_token(namespace, started),
        request=RespondWorkflowTaskCompletedRequest(force_create_new_workflow_task=True),
    )
    started = workflow_tasks.poll_once(namespace=namespace, task_queue=queue, identity="w", request_id="r2")
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    # Parked while this task runs: its completion does not answer it, and no task follows it.
    submitted = workflow_queries.query_submit(
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=started.execution.run_id,
        query=WorkflowQuery(query_type="state"),
        reject_condition=0,
        wait=timedelta(seconds=10),
    )
    assert isinstance(submitted, workflow_queries.Submitted)
    workflow_tasks.workflow_task_complete(
        namespace=namespace, token=_token(namespace, started), request=RespondWorkflowTaskCompletedRequest()
    )
    run = Execution.objects.get(pk=started.execution.pk)
    assert not run.queries_parked
    assert workflow_queries.query_status(submitted.query_id).task_queue == queue  # a query task now
