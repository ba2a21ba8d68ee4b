"""A mutation's rows on Postgres (engine/persistence/store.py `persist`, `insert`): they ride the run's
compare-and-swap statement, and a swap that fails writes none of them; a new run's ride one statement."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from perdura import clock
from temporalio.api.command.v1 import Command, CompleteWorkflowExecutionCommandAttributes
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import CommandType, WorkflowExecutionStatus
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    RespondWorkflowTaskCompletedRequest,
    StartWorkflowExecutionRequest,
)

from engine import ids, tokens
from engine.errors import AlreadyExists, Unavailable
from engine.history.lifecycle import signals
from engine.history.mutation import Mutation, TaskKind
from engine.models import CurrentRun, Execution, HistoryBatch, Task, Timer
from engine.persistence import store
from engine.services import workflow_tasks, workflows
from tenants.services.namespaces import namespace_register
from visibility.models import VisibilityRecord

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _started() -> tuple[Execution, str]:
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    queue = f"tq-{uuid.uuid4()}"
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=f"wf-{uuid.uuid4()}",
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name=queue),
    )
    result = workflows.workflow_start(namespace=namespace, request=request)
    return Execution.objects.get(namespace=namespace, run_id=result.run_id), queue


def _writes(captured: CaptureQueriesContext, table: str) -> list[str]:
    return [
        q["sql"] for q in captured.captured_queries if table in q["sql"] and "SELECT * FROM" not in q["sql"]
    ]


def test_a_workflow_task_start_is_one_statement_with_its_event_timer_task_deletion_and_wake_up():
    run, queue = _started()
    assert connection.vendor == "postgresql"
    with CaptureQueriesContext(connection) as captured:
        started = workflow_tasks.poll_once(
            namespace=run.namespace, task_queue=queue, identity="worker", request_id=str(uuid.uuid4())
        )
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    swaps = _writes(captured, "UPDATE engine_execution")
    assert len(swaps) == 1
    assert swaps[0].startswith("WITH swapped AS (UPDATE engine_execution")
    assert "INSERT INTO engine_historybatch" in swaps[0]
    assert "INSERT INTO engine_timer" in swaps[0]
    assert _writes(captured, "INSERT INTO engine_historybatch") == swaps  # not sent on its own too
    assert "DELETE FROM engine_task WHERE id = " in swaps[0]  # the claimed task goes with the start
    assert _writes(captured, "DELETE FROM engine_task") == swaps
    assert not Task.objects.filter(execution=run).exists()
    # Its wake-up (the run's new event) is NOTIFYed by the same statement.
    assert "pg_notify(" in swaps[0]
    assert [q["sql"] for q in captured.captured_queries if "pg_notify(" in q["sql"]] == swaps
    timers = list(Timer.objects.filter(execution=run).values_list("kind", "event_id", "attempt"))
    assert timers == [(Timer.Kind.WORKFLOW_TASK_TIMEOUT, 2, 1)]  # its scheduled event, attempt 1
    events = [e.event_id for e in store.history_events(Execution.objects.get(pk=run.pk))]
    assert events == [1, 2, 3]


def test_a_swap_that_fails_writes_none_of_the_mutations_rows():
    run, _ = _started()
    batches = HistoryBatch.objects.filter(execution=run).count()
    with transaction.atomic():
        execution = store.lock_execution(run.pk)
        assert execution is not None
        m = Mutation(store.decode_state(execution), clock.now(), ids.SYSTEM)
        signals.signal(m, signal_name="s", input=None, identity="me", request_id="")
        assert m.events
        execution.db_version -= 1  # another writer got there first
        task = Task.objects.get(execution=run)
        with pytest.raises(Unavailable):
            store.persist(execution, m, claimed_task=task.pk)
        # In the same transaction, so its own writes would show.
        assert HistoryBatch.objects.filter(execution=run).count() == batches
        assert Execution.objects.get(pk=run.pk).db_version == execution.db_version + 1
        transaction.set_rollback(True)
    assert Task.objects.filter(execution=run).count() == 1  # the first workflow task, untouched


def test_a_close_is_one_statement_with_its_visibility_record_and_the_rows_it_ends():
    run, queue = _started()
    started = workflow_tasks.poll_once(
        namespace=run.namespace, task_queue=queue, identity="worker", request_id=str(uuid.uuid4())
    )
    assert isinstance(started, workflow_tasks.StartedWorkflowTask)
    token = tokens.TaskToken(
        namespace_id=str(run.namespace_id),
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        scheduled_event_id=started.scheduled_event_id,
        attempt=started.attempt,
        started_event_id=started.started_event_id,
    )
    complete = Command(
        command_type=CommandType.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
        complete_workflow_execution_command_attributes=CompleteWorkflowExecutionCommandAttributes(),
    )
    assert Timer.objects.filter(execution=run).exists()  # the workflow task's timeout, ended by the close
    with CaptureQueriesContext(connection) as captured:
        workflow_tasks.workflow_task_complete(
            namespace=run.namespace,
            token=token,
            request=RespondWorkflowTaskCompletedRequest(commands=[complete]),
        )
    swaps = _writes(captured, "UPDATE engine_execution")
    assert len(swaps) == 1
    for write in (
        "INSERT INTO visibility_visibilityrecord",
        "DELETE FROM engine_timer",
        "DELETE FROM engine_task",
    ):
        assert write in swaps[0], write
        assert _writes(captured, write) == swaps, write  # not sent on its own too
    assert not Timer.objects.filter(execution=run).exists()
    record = VisibilityRecord.objects.get(execution_id=run.pk)
    assert record.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    assert record.history_length == 5  # through the completion event


def _start_request(namespace, workflow_id: str, request_id: str = "") -> StartWorkflowExecutionRequest:
    return StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=workflow_id,
        workflow_type=WorkflowType(name="T"),
        task_queue=TaskQueue(name="tq"),
        request_id=request_id,
    )


def test_a_start_of_a_new_id_is_three_statements():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    workflows.workflow_start(namespace=namespace, request=_start_request(namespace, "other"))  # keys read
    with CaptureQueriesContext(connection) as captured:
        result = workflows.workflow_start(namespace=namespace, request=_start_request(namespace, "wf"))
    sent = [q["sql"] for q in captured.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(sent) == 3, sent
    claim, row, rest = sent
    # The id is claimed by inserting its current-run row: no read, no lock of a row that is not there.
    assert claim.startswith("INSERT INTO engine_currentrun")
    assert "ON CONFLICT" in claim
    assert row.startswith("INSERT INTO engine_execution")
    assert rest.startswith("WITH swapped AS (SELECT 1)")
    for write in (
        "INSERT INTO engine_historybatch",
        "INSERT INTO engine_task",
        "INSERT INTO visibility_visibilityrecord",
        "pg_notify(",
    ):
        assert write in rest, write
    run = Execution.objects.get(namespace=namespace, workflow_id="wf")
    assert run.run_id == result.run_id
    assert CurrentRun.objects.get(namespace=namespace, workflow_id="wf").run_id == run.run_id
    assert VisibilityRecord.objects.get(execution_id=run.pk).run_id == run.run_id
    assert Task.objects.filter(execution=run, kind=TaskKind.WORKFLOW).count() == 1
    assert [e.event_id for e in store.history_events(run)] == [1, 2]


def test_a_start_of_a_taken_id_writes_nothing_and_answers_as_before():
    namespace = namespace_register(name=f"ns-{uuid.uuid4().hex[:8]}")
    first = workflows.workflow_start(namespace=namespace, request=_start_request(namespace, "wf", "req-1"))
    # The same request again (a client's retry): the same run.
    again = workflows.workflow_start(namespace=namespace, request=_start_request(namespace, "wf", "req-1"))
    assert again.run_id == first.run_id
    assert again.started
    with pytest.raises(AlreadyExists):
        workflows.workflow_start(namespace=namespace, request=_start_request(namespace, "wf", "req-2"))
    assert Execution.objects.filter(namespace=namespace).count() == 1
    current = CurrentRun.objects.get(namespace=namespace, workflow_id="wf")
    assert (current.run_id, current.start_request_id) == (first.run_id, "req-1")
