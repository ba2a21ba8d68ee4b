"""Workflow updates through the official SDK: accept, reject, complete, deduplicate, update-with-start."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WithStartWorkflowOperation, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.common import WorkflowIDConflictPolicy

from tests.e2e import workflows as w
from tests.e2e.conftest import event_types, events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_update_returns_its_result_and_is_recorded(client, task_queue):
    handle = await client.start_workflow(w.UpdatableWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.execute_update(w.UpdatableWorkflow.add, "a") == 1
    assert await handle.execute_update(w.UpdatableWorkflow.add, "b") == 2
    types = await event_types(handle)
    assert types.count("WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == 2
    assert types.count("WORKFLOW_EXECUTION_UPDATE_COMPLETED") == 2
    history = await events(handle)
    completed = [
        e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED
    ]
    by_id = {e.event_id: e for e in history}
    for event in completed:
        accepted = by_id[event.workflow_execution_update_completed_event_attributes.accepted_event_id]
        assert accepted.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    await handle.signal(w.UpdatableWorkflow.finish)
    assert await handle.result() == ["a", "b"]


async def test_rejected_update_writes_no_update_events(client, task_queue):
    handle = await client.start_workflow(w.UpdatableWorkflow.run, id=new_id(), task_queue=task_queue)
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await handle.execute_update(w.UpdatableWorkflow.add, "")
    assert "empty values are not allowed" in str(info.value.cause)
    types = await event_types(handle)
    assert "WORKFLOW_EXECUTION_UPDATE_ACCEPTED" not in types
    await handle.signal(w.UpdatableWorkflow.finish)
    assert await handle.result() == []


async def test_update_id_deduplicates(client, task_queue):
    handle = await client.start_workflow(w.UpdatableWorkflow.run, id=new_id(), task_queue=task_queue)
    first = await handle.execute_update(w.UpdatableWorkflow.add, "x", id="same-update")
    again = await handle.execute_update(w.UpdatableWorkflow.add, "x", id="same-update")
    assert first == again == 1
    await handle.signal(w.UpdatableWorkflow.finish)
    assert await handle.result() == ["x"]


async def test_update_handle_waits_for_acceptance_then_result(client, task_queue):
    handle = await client.start_workflow(w.UpdatableWorkflow.run, id=new_id(), task_queue=task_queue)
    update = await handle.start_update(
        w.UpdatableWorkflow.add, "later", wait_for_stage=WorkflowUpdateStage.ACCEPTED
    )
    assert await update.result() == 1
    concurrent = await asyncio.gather(
        *(handle.execute_update(w.UpdatableWorkflow.add, f"c{i}") for i in range(5))
    )
    assert sorted(concurrent) == [2, 3, 4, 5, 6]
    await handle.signal(w.UpdatableWorkflow.finish)
    assert len(await handle.result()) == 6


async def test_update_with_start(client, task_queue):
    workflow_id = new_id()
    start = WithStartWorkflowOperation(
        w.UpdatableWorkflow.run,
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    assert (
        await client.execute_update_with_start_workflow(
            w.UpdatableWorkflow.add, "first", start_workflow_operation=start
        )
        == 1
    )
    start_again = WithStartWorkflowOperation(
        w.UpdatableWorkflow.run,
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    assert (
        await client.execute_update_with_start_workflow(
            w.UpdatableWorkflow.add, "second", start_workflow_operation=start_again
        )
        == 2
    )
    handle = await start.workflow_handle()
    assert (await start_again.workflow_handle()).result_run_id == handle.result_run_id
    await handle.signal(w.UpdatableWorkflow.finish)
    assert await handle.result() == ["first", "second"]


async def test_update_respects_first_execution_run_id(client, task_queue):
    """An update through an old run's handle must not reach a newer run of the same workflow id."""
    from temporalio.service import RPCError, RPCStatusCode

    workflow_id = new_id()
    first = await client.start_workflow(w.UpdatableWorkflow.run, id=workflow_id, task_queue=task_queue)
    assert await first.execute_update(w.UpdatableWorkflow.add, "a") == 1
    await first.signal(w.UpdatableWorkflow.finish)
    await first.result()
    await client.start_workflow(w.UpdatableWorkflow.run, id=workflow_id, task_queue=task_queue)
    stale = client.get_workflow_handle(workflow_id, first_execution_run_id=first.first_execution_run_id)
    with pytest.raises(RPCError) as info:
        await stale.execute_update(w.UpdatableWorkflow.add, "b")
    assert info.value.status == RPCStatusCode.NOT_FOUND
    assert "workflow execution not found" in info.value.message
    await client.get_workflow_handle(workflow_id).signal(w.UpdatableWorkflow.finish)


async def test_accepted_update_fails_when_the_run_completes_first(client, task_queue):
    from temporalio.exceptions import ApplicationError

    handle = await client.start_workflow(w.SlowUpdateWorkflow.run, id=new_id(), task_queue=task_queue)
    update = await handle.start_update(
        w.SlowUpdateWorkflow.forever, wait_for_stage=WorkflowUpdateStage.ACCEPTED
    )
    await handle.signal(w.SlowUpdateWorkflow.finish)
    assert await handle.result() == "done"
    with pytest.raises(WorkflowUpdateFailedError) as info:
        await update.result()
    assert isinstance(info.value.cause, ApplicationError)
    assert info.value.cause.type == "AcceptedUpdateCompletedWorkflow"
