"""Continue-as-new and start delay through the official SDK."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from tests.e2e import workflows as w
from tests.e2e.conftest import events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_continue_as_new_chain(client, task_queue):
    workflow_id = new_id()
    handle = await client.start_workflow(
        w.ContinueAsNewWorkflow.run, args=[3, 0], id=workflow_id, task_queue=task_queue
    )
    assert await handle.result() == 4  # four runs, one activity each; result() follows the chain
    first = client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
    first_history = await events(first)
    closing = first_history[-1]
    assert closing.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    next_run = closing.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    assert (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW
    second = client.get_workflow_handle(workflow_id, run_id=next_run)
    started = (await events(second))[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id == handle.result_run_id
    assert started.first_execution_run_id == handle.result_run_id
    latest = await client.get_workflow_handle(workflow_id).describe()
    assert latest.status == WorkflowExecutionStatus.COMPLETED
    assert latest.run_id not in (handle.result_run_id, next_run)


async def test_start_delay(client, task_queue):
    started = time.monotonic()
    handle = await client.start_workflow(
        w.HelloWorkflow.run, "later", id=new_id(), task_queue=task_queue, start_delay=timedelta(seconds=2)
    )
    assert await handle.result() == "hello later"
    assert time.monotonic() - started >= 2.0
    first = (await events(handle))[0].workflow_execution_started_event_attributes
    assert first.first_workflow_task_backoff.ToTimedelta() == timedelta(seconds=2)
