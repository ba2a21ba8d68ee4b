"""Differential test of a pause that lands while a workflow task is running, on the real dev server
(pause enabled by tests/support/reference.py) and on `perdura dev`.

The story: a signal handler holds its workflow task for a second; the run is paused meanwhile. The task's
completion is accepted (it schedules an activity), the Paused event lands after it, no activity attempt
is handed out while paused although a worker polls for it, and the unpause lets the run finish.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import (
    PauseWorkflowExecutionRequest,
    UnpauseWorkflowExecutionRequest,
)
from temporalio.client import Client
from temporalio.worker import Worker

from tests.support.history_compare import normalize

pytestmark = pytest.mark.reference


@activity.defn
async def in_flight_echo(value: str) -> str:
    return f"echo {value}"


@workflow.defn(sandboxed=False)
class SlowSignalWorkflow:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal
    def go_slowly(self) -> None:
        time.sleep(
            1.0
        )  # holds the workflow task (the SDK's deadlock detector allows 2 s) while the pause lands
        self.go = True

    @workflow.run
    async def run(self, queue: str) -> str:
        await workflow.wait_condition(lambda: self.go)
        return await workflow.execute_activity(
            in_flight_echo, "hi", task_queue=queue, start_to_close_timeout=timedelta(seconds=30)
        )


async def _types(handle: Any) -> list[int]:
    return [e.event_type async for e in handle.fetch_history_events()]


async def _until(handle: Any, done: Any) -> list[int]:
    for _ in range(400):
        types = await _types(handle)
        if done(types):
            return types
        await asyncio.sleep(0.025)
    raise AssertionError(f"never reached: {[EventType.Name(t) for t in await _types(handle)]}")


async def _story(client: Client, workflow_id: str) -> dict[str, Any]:
    queue = f"tq-{workflow_id}"
    activity_queue = f"{queue}-acts"
    out: dict[str, Any] = {}
    async with Worker(client, task_queue=queue, workflows=[SlowSignalWorkflow]):
        handle = await client.start_workflow(
            SlowSignalWorkflow.run, activity_queue, id=workflow_id, task_queue=queue
        )
        await _until(handle, lambda t: EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in t)
        await handle.signal(SlowSignalWorkflow.go_slowly)
        await _until(handle, lambda t: t.count(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED) == 2)
        await client.workflow_service.pause_workflow_execution(
            PauseWorkflowExecutionRequest(namespace="default", workflow_id=workflow_id, reason="mid-task")
        )
        await _until(handle, lambda t: EventType.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED in t)
        async with Worker(client, task_queue=activity_queue, activities=[in_flight_echo]):
            await asyncio.sleep(1.5)  # an activity worker polls, yet no attempt is handed out while paused
            out["history while paused"] = normalize([e async for e in handle.fetch_history_events()])
            await client.workflow_service.unpause_workflow_execution(
                UnpauseWorkflowExecutionRequest(namespace="default", workflow_id=workflow_id)
            )
            out["result"] = await asyncio.wait_for(handle.result(), timeout=30)
        out["history"] = normalize([e async for e in handle.fetch_history_events()])
    return out


async def test_a_pause_during_a_workflow_task_same_as_temporal(both_clients):
    workflow_id = f"pause-in-flight-{uuid.uuid4().hex[:8]}"
    temporal = await _story(both_clients["temporal"], workflow_id)
    assert [e["type"] for e in temporal["history while paused"]][4:] == [
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
        "ActivityTaskScheduled",
        "WorkflowExecutionPaused",
    ]
    assert temporal["result"] == "echo hi"
    perdura = await _story(both_clients["perdura"], workflow_id)
    differences = {k: (temporal[k], perdura[k]) for k in temporal if temporal[k] != perdura[k]}
    assert not differences, differences
