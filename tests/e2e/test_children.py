"""Child workflows, external signals and cancels, parent close policies, through the official SDK."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from tests.e2e import workflows as w
from tests.e2e.conftest import event_types, events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_child_result_reaches_the_parent(client, task_queue):
    workflow_id = new_id()
    handle = await client.start_workflow(w.ParentWorkflow.run, "kid", id=workflow_id, task_queue=task_queue)
    assert await handle.result() == "hello kid"
    types = await event_types(handle)
    for expected in (
        "START_CHILD_WORKFLOW_EXECUTION_INITIATED",
        "CHILD_WORKFLOW_EXECUTION_STARTED",
        "CHILD_WORKFLOW_EXECUTION_COMPLETED",
    ):
        assert expected in types
    child = client.get_workflow_handle(f"{workflow_id}-child")
    started = (await events(child))[0].workflow_execution_started_event_attributes
    assert started.parent_workflow_execution.workflow_id == workflow_id
    assert started.parent_workflow_execution.run_id == handle.result_run_id
    assert started.root_workflow_execution.workflow_id == workflow_id
    history = await events(handle)
    completed = next(
        e for e in history if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED
    )
    attrs = completed.child_workflow_execution_completed_event_attributes
    by_id = {e.event_id: e for e in history}
    assert by_id[attrs.started_event_id].event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    assert (
        by_id[attrs.initiated_event_id].event_type
        == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    )


async def test_child_failure_reaches_the_parent(client, task_queue):
    handle = await client.start_workflow(w.FailingChildParentWorkflow.run, id=new_id(), task_queue=task_queue)
    assert (await handle.result()) == "child failed: Nope: workflow says no"


async def test_child_id_conflict(client, task_queue):
    taken = await client.start_workflow(w.LongSleepWorkflow.run, id=new_id(), task_queue=task_queue)
    handle = await client.start_workflow(
        w.ConflictingChildWorkflow.run, taken.id, id=new_id(), task_queue=task_queue
    )
    assert await handle.result() == "already started"
    assert "START_CHILD_WORKFLOW_EXECUTION_FAILED" in await event_types(handle)
    await taken.terminate()


async def test_parent_signals_its_child(client, task_queue):
    handle = await client.start_workflow(w.SignalChildWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.result() == ["from parent"]
    types = await event_types(handle)
    assert "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED" in types
    assert "EXTERNAL_WORKFLOW_EXECUTION_SIGNALED" in types


async def test_signal_external_and_missing_target(client, task_queue):
    target = await client.start_workflow(w.SignalWorkflow.run, 1, id=new_id(), task_queue=task_queue)
    handle = await client.start_workflow(
        w.SignalExternalWorkflow.run, target.id, id=new_id(), task_queue=task_queue
    )
    assert (await handle.result()).startswith("missing target")
    assert await target.result() == ["external"]
    assert "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED" in await event_types(handle)


async def test_parent_cancels_its_child(client, task_queue):
    handle = await client.start_workflow(w.CancelChildWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.result() == "saw cancellation"
    types = await event_types(handle)
    assert "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED" in types
    assert "EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED" in types


async def test_parent_close_policies(client, task_queue):
    workflow_id = new_id()
    handle = await client.start_workflow(
        w.AbandonAndTerminateParentWorkflow.run, id=workflow_id, task_queue=task_queue
    )
    assert await handle.result() == "done"
    terminated = client.get_workflow_handle(f"{workflow_id}-terminated")
    abandoned = client.get_workflow_handle(f"{workflow_id}-abandoned")
    for _ in range(50):
        if (await terminated.describe()).status == WorkflowExecutionStatus.TERMINATED:
            break
        await asyncio.sleep(0.1)
    assert (await terminated.describe()).status == WorkflowExecutionStatus.TERMINATED
    assert (await abandoned.describe()).status == WorkflowExecutionStatus.RUNNING
    await abandoned.terminate()
