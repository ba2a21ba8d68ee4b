"""Differential one-time versioning override: one story told to the real Temporal dev server and to
`perdura dev`, the same observations.

The story: workers of versions 1.0 and 2.0 of one deployment poll one task queue; 1.0 is current; an
auto-upgrade run starts on 1.0; an operator sets a one-time override to 2.0, then signals the run twice.
What the real server does (Server 1.32.0), asserted below so this file states it:
- describe shows the one-time override while it is pending;
- the next workflow task runs on 2.0, and its completion there clears the override;
- the run, auto-upgrade again, goes back to the current version 1.0 for the task after.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio import workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionMessage
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client, WorkflowHandle
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, visible

pytestmark = pytest.mark.reference


@workflow.defn(name="OneTimeSteps", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class Steps:
    """Each `step` signal makes a workflow task; `finish` ends the run. The same code on both versions:
    which version ran each task is read from its WorkflowTaskCompleted event."""

    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self.done)

    @workflow.signal
    def step(self) -> None:
        pass

    @workflow.signal
    def finish(self) -> None:
        self.done = True


def _worker(client: Client, queue: str, version: WorkerDeploymentVersion) -> Worker:
    config = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    return Worker(client, task_queue=queue, workflows=[Steps], deployment_config=config)


async def _override(handle: WorkflowHandle) -> str:
    described = await handle.describe()
    override = described.raw_description.workflow_execution_info.versioning_info.versioning_override
    which = override.WhichOneof("override")
    if which == "one_time":
        target = override.one_time.target_deployment_version
        return f"one_time {target.build_id}"
    return which or "none"


async def _tasks_ran_on(handle: WorkflowHandle, count: int) -> list[str]:
    """The build ids of the run's completed workflow tasks, once there are `count` of them."""
    builds: list[str] = []
    for _ in range(200):
        builds = [
            e.workflow_task_completed_event_attributes.deployment_version.build_id
            async for e in handle.fetch_history_events()
            if e.HasField("workflow_task_completed_event_attributes")
        ]
        if len(builds) >= count:
            return builds
        await asyncio.sleep(0.05)
    return builds


async def _story(client: Client) -> dict[str, Any]:
    name = new_id("one-time")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    seen: dict[str, Any] = {}
    async with _worker(client, queue, v1), _worker(client, queue, v2):
        await visible(client, v2)
        await set_current(client, v1, (await visible(client, v1)).conflict_token)
        await asyncio.sleep(1)  # the real server propagates routing to its matching partitions
        run = await client.start_workflow(Steps.run, id=new_id(), task_queue=queue)
        seen["first task"] = await _tasks_ran_on(run, 1)
        one_time = VersioningOverride(
            one_time=VersioningOverride.OneTimeOverride(
                target_deployment_version=VersionMessage(deployment_name=name, build_id="2.0")
            )
        )
        await client.workflow_service.update_workflow_execution_options(
            rr.UpdateWorkflowExecutionOptionsRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=run.id),
                workflow_execution_options=WorkflowExecutionOptions(versioning_override=one_time),
                update_mask=FieldMask(paths=["versioning_override"]),
            )
        )
        seen["override pending"] = await _override(run)
        await run.signal(Steps.step)
        seen["the task after the override"] = await _tasks_ran_on(run, 2)
        seen["override after it"] = await _override(run)
        await run.signal(Steps.step)
        seen["the next task"] = await _tasks_ran_on(run, 3)
        await run.signal(Steps.finish)
        await run.result()
    return seen


async def test_a_one_time_override_moves_one_task_then_clears_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        _story(both_clients["temporal"]), _story(both_clients["perdura"])
    )
    assert temporal == {
        "first task": ["1.0"],
        "override pending": "one_time 2.0",
        "the task after the override": ["1.0", "2.0"],
        "override after it": "none",
        "the next task": ["1.0", "2.0", "1.0"],
    }
    assert perdura == temporal
