"""Cron workflows: each run starts at the schedule's next time and sees the previous run's result."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import ContinueAsNewInitiator, EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import workflows as w
from tests.e2e.conftest import events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_cron_chain_carries_the_last_result(client, task_queue):
    workflow_id = new_id()
    handle = await client.start_workflow(
        w.CronCounterWorkflow.run, id=workflow_id, task_queue=task_queue, cron_schedule="@every 1s"
    )
    first = client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
    run_ids = [handle.result_run_id]
    for _ in range(100):  # wait for the second run of the chain to complete
        history = await events(client.get_workflow_handle(workflow_id, run_id=run_ids[-1]))
        closing = history[-1]
        if closing.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            run_ids.append(closing.workflow_execution_completed_event_attributes.new_execution_run_id)
            if len(run_ids) == 3:
                break
        await asyncio.sleep(0.1)
    assert len(run_ids) == 3
    assert (await first.describe()).status == WorkflowExecutionStatus.COMPLETED
    second = await events(client.get_workflow_handle(workflow_id, run_id=run_ids[1]))
    started = second[0].workflow_execution_started_event_attributes
    assert started.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE
    assert started.cron_schedule == "@every 1s"
    assert started.first_workflow_task_backoff.ToTimedelta().total_seconds() == 1.0
    assert started.last_completion_result.payloads[0].data == b"1"
    await client.get_workflow_handle(workflow_id).terminate()


async def test_invalid_cron_is_refused(client, task_queue):
    with pytest.raises(RPCError) as info:
        await client.start_workflow(
            w.CronCounterWorkflow.run, id=new_id(), task_queue=task_queue, cron_schedule="nope"
        )
    assert info.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert "Invalid CronSchedule" in info.value.message
