"""Differential worker-deployment routing test: one story told to the real Temporal dev server and to
`perdura dev`, the same observations.

The story: workers of versions 1.0 and 2.0 of one deployment poll one task queue; 1.0 is made current; a
pinned and an auto-upgrade run start and run their first task on 1.0; 2.0 is made current; both runs are
signalled to finish. What the real server does (Server 1.32.0), asserted below so this file states it:
- the pinned run stays on 1.0 and the auto-upgrade run moves to 2.0, and a new run starts on 2.0;
- each WorkflowTaskCompleted carries the completing worker's deployment version and the run's behaviour.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, visible

pytestmark = pytest.mark.reference


def _worker(client: Client, queue: str, version: WorkerDeploymentVersion, *workflows: type) -> Worker:
    config = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    return Worker(client, task_queue=queue, workflows=list(workflows), deployment_config=config)


async def _routed_to(client: Client, name: str, build_id: str) -> None:
    """Until describe shows `build_id` current (the real server propagates routing asynchronously)."""
    for _ in range(200):
        response = await client.workflow_service.describe_worker_deployment(
            rr.DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name)
        )
        if response.worker_deployment_info.routing_config.current_deployment_version.build_id == build_id:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{build_id} never became current")


async def _completions(handle: WorkflowHandle) -> list[tuple[str, str]]:
    """(build id, behaviour) of each WorkflowTaskCompleted event."""
    out = []
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_completed_event_attributes"):
            attrs = event.workflow_task_completed_event_attributes
            out.append(
                (attrs.deployment_version.build_id, VersioningBehavior.Name(attrs.versioning_behavior))
            )
    return out


async def _story(client: Client) -> dict[str, Any]:
    name = new_id("routing")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with (
        _worker(client, queue, v1, dw.PinnedV1, dw.AutoV1),
        _worker(client, queue, v2, dw.PinnedV2, dw.AutoV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        await _routed_to(client, name, "1.0")
        pinned = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        auto = await client.start_workflow("RoutedAuto", id=new_id(), task_queue=queue)
        first = [await pinned.query("build"), await auto.query("build")]
        await set_current(client, v2, token)
        await _routed_to(client, name, "2.0")
        await pinned.signal("finish")
        await auto.signal("finish")
        fresh = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        await fresh.signal("finish")
        return {
            "first": first,
            "results": [await pinned.result(), await auto.result(), await fresh.result()],
            "pinned": await _completions(pinned),
            "auto": await _completions(auto),
        }


async def test_pinned_runs_stay_and_auto_upgrade_runs_move_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        _story(both_clients["temporal"]), _story(both_clients["perdura"])
    )
    assert temporal["first"] == ["v1", "v1"]
    assert temporal["results"] == ["v1", "v2", "v2"]
    assert temporal["pinned"][-1] == ("1.0", "VERSIONING_BEHAVIOR_PINNED")
    assert temporal["auto"][-1] == ("2.0", "VERSIONING_BEHAVIOR_AUTO_UPGRADE")
    assert perdura == temporal
