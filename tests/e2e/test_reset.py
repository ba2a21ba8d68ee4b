"""ResetWorkflowExecution through the official SDK's service client and the `temporal` CLI, in both modes."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType, WorkflowTaskFailedCause
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import workflows as w
from tests.e2e.conftest import events, new_id
from tests.support.reference import TEMPORAL

pytestmark = pytest.mark.usefixtures("worker")
COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


async def wait_for(handle, event_type: int, count: int = 1, timeout: float = 15) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in await events(handle) if e.event_type == event_type]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.05)
    raise TimeoutError(f"fewer than {count} {EventType.Name(event_type)} in {handle.id}")


def reset_request(handle, finish_event_id: int, **fields) -> ResetWorkflowExecutionRequest:
    fields.setdefault("request_id", str(uuid.uuid4()))
    fields.setdefault("reason", "reset by test")
    return ResetWorkflowExecutionRequest(
        namespace="default",
        workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=handle.result_run_id or ""),
        workflow_task_finish_event_id=finish_event_id,
        **fields,
    )


async def test_reset_running_run_reapplies_and_terminates_the_old_one(client, task_queue):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[4, 0, 0], id=new_id(), task_queue=task_queue
    )
    await wait_for(handle, COMPLETED, 1)
    await handle.signal(w.ResettableWorkflow.add, "a")
    await wait_for(handle, COMPLETED, 2)
    assert await handle.execute_update(w.ResettableWorkflow.push, "u") == 2
    first = (await wait_for(handle, COMPLETED, 3))[0].event_id

    request = reset_request(handle, first, reason="operator reset")
    response = await client.workflow_service.reset_workflow_execution(request)
    # The same request again is answered with the same new run, and resets nothing more.
    again = await client.workflow_service.reset_workflow_execution(request)
    assert again.run_id == response.run_id

    old = await events(client.get_workflow_handle(handle.id, run_id=handle.result_run_id))
    assert old[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
    assert old[-1].workflow_execution_terminated_event_attributes.reason == "operator reset"
    assert old[-1].workflow_execution_terminated_event_attributes.identity == "history-resetter"

    current = client.get_workflow_handle(handle.id)
    assert (await current.describe()).run_id == response.run_id
    new = client.get_workflow_handle(handle.id, run_id=response.run_id)
    await wait_for(new, COMPLETED, 1)
    await new.signal(w.ResettableWorkflow.add, "b")
    await new.signal(w.ResettableWorkflow.add, "c")
    assert await new.result() == ["a", "u", "b", "c"]

    history = await events(new)
    assert [e.event_id for e in history] == list(range(1, len(history) + 1))
    assert history[:3] == old[:3]  # copied as they were, times and all
    failed = history[3].workflow_task_failed_event_attributes
    assert failed.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
    assert (failed.base_run_id, failed.new_run_id) == (handle.result_run_id, response.run_id)
    assert failed.failure.message == "operator reset"
    assert history[4].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    assert history[5].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED
    old_run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    assert (await old_run.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_reset_excluding_signals_keeps_updates(client, task_queue):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[3, 0, 0], id=new_id(), task_queue=task_queue
    )
    await wait_for(handle, COMPLETED, 1)
    await handle.signal(w.ResettableWorkflow.add, "a")
    await wait_for(handle, COMPLETED, 2)
    assert await handle.execute_update(w.ResettableWorkflow.push, "u") == 2
    first = (await events(handle))[3].event_id
    response = await client.workflow_service.reset_workflow_execution(
        reset_request(
            handle,
            first,
            reset_reapply_exclude_types=[ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
        )
    )
    new = client.get_workflow_handle(handle.id, run_id=response.run_id)
    await wait_for(new, COMPLETED, 1)
    await new.signal(w.ResettableWorkflow.add, "x")
    await wait_for(new, COMPLETED, 2)
    await new.signal(w.ResettableWorkflow.add, "y")
    assert await new.result() == ["u", "x", "y"]


async def test_reset_takes_over_pending_activity_and_timer(client, task_queue):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[1, 2.0, 1.5], id=new_id(), task_queue=task_queue
    )
    await wait_for(handle, COMPLETED, 1)
    await handle.signal(w.ResettableWorkflow.add, "go")
    second = (await wait_for(handle, COMPLETED, 2))[1].event_id
    response = await client.workflow_service.reset_workflow_execution(reset_request(handle, second))
    new = client.get_workflow_handle(handle.id, run_id=response.run_id)
    assert await asyncio.wait_for(new.result(), 20) == ["go", "timer", "slept"]
    types = [e.event_type for e in await events(new)]
    assert types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 1  # copied, not scheduled again
    assert EventType.EVENT_TYPE_TIMER_FIRED in types


async def test_reset_a_completed_run(client, task_queue):
    handle = await client.start_workflow(w.HelloWorkflow.run, "again", id=new_id(), task_queue=task_queue)
    assert await handle.result() == "hello again"
    response = await client.workflow_service.reset_workflow_execution(reset_request(handle, 4))
    new = client.get_workflow_handle(handle.id, run_id=response.run_id)
    assert await new.result() == "hello again"
    old_run = client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    assert (await old_run.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_bad_resets_change_nothing(client, task_queue):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[1, 30.0, 0], id=new_id(), task_queue=task_queue
    )
    await wait_for(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    cases = [
        (reset_request(handle, 4, request_id=""), RPCStatusCode.INVALID_ARGUMENT, "RequestId is not set"),
        (reset_request(handle, 1), RPCStatusCode.INVALID_ARGUMENT, "finish ID must be > 1"),
        (reset_request(handle, 99), RPCStatusCode.INVALID_ARGUMENT, "finish ID must be > 1"),
        # Event 5 is ActivityTaskScheduled: not the end of a workflow task.
        (reset_request(handle, 5), RPCStatusCode.INVALID_ARGUMENT, "Can only reset workflow to event ID"),
    ]
    for request, code, text in cases:
        with pytest.raises(RPCError) as error:
            await client.workflow_service.reset_workflow_execution(request)
        assert error.value.status == code
        assert text in error.value.message
    missing = reset_request(client.get_workflow_handle(new_id()), 4)
    with pytest.raises(RPCError) as error:
        await client.workflow_service.reset_workflow_execution(missing)
    assert error.value.status == RPCStatusCode.NOT_FOUND

    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    assert description.run_id == handle.result_run_id
    await handle.signal(w.ResettableWorkflow.add, "done")
    await handle.terminate("test over")


async def test_reset_refuses_pending_children(client, task_queue):
    handle = await client.start_workflow(
        w.AbandonAndTerminateParentWorkflow.run, id=new_id(), task_queue=task_queue
    )
    assert await handle.result() == "done"
    # The last workflow task started with both children running.
    completed = [e for e in await events(handle) if e.event_type == COMPLETED]
    with pytest.raises(RPCError) as error:
        await client.workflow_service.reset_workflow_execution(reset_request(handle, completed[-1].event_id))
    assert error.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert "pending child workflows" in error.value.message
    await client.get_workflow_handle(f"{handle.id}-abandoned").terminate("test over")


async def test_cli_reset_to_last_workflow_task(client, task_queue, server):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[2, 0, 0], id=new_id(), task_queue=task_queue
    )
    await wait_for(handle, COMPLETED, 1)
    await handle.signal(w.ResettableWorkflow.add, "a")
    await wait_for(handle, COMPLETED, 2)
    result = await asyncio.to_thread(
        subprocess.run,
        [
            str(TEMPORAL),
            "workflow",
            "reset",
            "--address",
            server.address,
            "--namespace",
            "default",
            "--workflow-id",
            handle.id,
            "--type",
            "LastWorkflowTask",
            "--reason",
            "cli reset",
            "--yes",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    current = client.get_workflow_handle(handle.id)
    new_run_id = (await current.describe()).run_id
    assert new_run_id != handle.result_run_id
    await client.get_workflow_handle(handle.id, run_id=new_run_id).signal(w.ResettableWorkflow.add, "b")
    assert await current.result() == ["a", "b"]
