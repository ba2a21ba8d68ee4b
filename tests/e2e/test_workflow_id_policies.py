"""Workflow id reuse and conflict policies, as the SDK exposes them."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from tests.e2e import workflows as w
from tests.e2e.conftest import new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_reject_duplicate_refuses_a_closed_id(client, task_queue):
    workflow_id = new_id()
    first = await client.start_workflow(w.HelloWorkflow.run, "a", id=workflow_id, task_queue=task_queue)
    await first.result()
    with pytest.raises(WorkflowAlreadyStartedError) as info:
        await client.start_workflow(
            w.HelloWorkflow.run,
            "b",
            id=workflow_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    assert info.value.run_id == first.result_run_id


async def test_allow_duplicate_failed_only(client, task_queue):
    succeeded = new_id()
    handle = await client.start_workflow(w.HelloWorkflow.run, "a", id=succeeded, task_queue=task_queue)
    await handle.result()
    with pytest.raises(WorkflowAlreadyStartedError):
        await client.start_workflow(
            w.HelloWorkflow.run,
            "b",
            id=succeeded,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
        )
    failed = new_id()
    handle = await client.start_workflow(w.FailingWorkflow.run, id=failed, task_queue=task_queue)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    again = await client.start_workflow(
        w.HelloWorkflow.run,
        "c",
        id=failed,
        task_queue=task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    )
    assert await again.result() == "hello c"


async def test_allow_duplicate_starts_a_new_run_after_close(client, task_queue):
    workflow_id = new_id()
    first = await client.start_workflow(w.HelloWorkflow.run, "a", id=workflow_id, task_queue=task_queue)
    await first.result()
    second = await client.start_workflow(w.HelloWorkflow.run, "b", id=workflow_id, task_queue=task_queue)
    assert second.result_run_id != first.result_run_id
    assert await second.result() == "hello b"
    # Without a run id, a handle follows the newest run.
    assert (await client.get_workflow_handle(workflow_id).describe()).run_id == second.result_run_id


async def test_conflict_policy_use_existing(client, task_queue):
    workflow_id = new_id()
    first = await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
    second = await client.start_workflow(
        w.LongSleepWorkflow.run,
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    assert second.result_run_id == first.result_run_id
    await first.terminate()


async def test_conflict_policy_terminate_existing(client, task_queue):
    workflow_id = new_id()
    first = await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
    second = await client.start_workflow(
        w.HelloWorkflow.run,
        "new",
        id=workflow_id,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
    )
    assert second.result_run_id != first.result_run_id
    assert await second.result() == "hello new"
    old_run = client.get_workflow_handle(workflow_id, run_id=first.result_run_id)
    assert (await old_run.describe()).status == WorkflowExecutionStatus.TERMINATED
