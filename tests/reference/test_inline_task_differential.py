"""Differential: tasks handed out without a poll (the next one in a completion's answer, an eager start's)
are not routed by worker version, on the real server as on Perdura.

The story, in raw calls so that it is exact: versions 1.0 and 2.0 of one deployment have polled a queue;
1.0 is current; a run's first task is polled by 1.0; 2.0 is made current and the run is signalled while
that task is in flight; 1.0 completes it as auto-upgrade, asking for the next task at once. What the real
server does (Server 1.32.0), asserted below so this file states it: the next task is handed back to 1.0 in
the completion's answer, not routed to 2.0; and an eager start on the versioned queue is handed its first
task, whatever version the starter's worker is.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.api.common.v1 import WorkflowExecution, WorkflowType
from temporalio.api.deployment.v1 import WorkerDeploymentOptions
from temporalio.api.enums.v1 import VersioningBehavior, WorkerVersioningMode
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.service import RPCError

from tests.e2e.conftest import new_id

pytestmark = pytest.mark.reference

VERSIONED = WorkerVersioningMode.WORKER_VERSIONING_MODE_VERSIONED


async def _story(client: Client) -> dict[str, bool]:
    service, ns = client.workflow_service, client.namespace
    name, queue = new_id("inline"), new_id("tq")

    def options(build_id: str) -> WorkerDeploymentOptions:
        return WorkerDeploymentOptions(
            deployment_name=name, build_id=build_id, worker_versioning_mode=VERSIONED
        )

    async def poll(build_id: str, seconds: float) -> rr.PollWorkflowTaskQueueResponse | None:
        request = rr.PollWorkflowTaskQueueRequest(
            namespace=ns,
            task_queue=TaskQueue(name=queue),
            identity=build_id,
            deployment_options=options(build_id),
        )
        try:
            return await service.poll_workflow_task_queue(request, timeout=timedelta(seconds=seconds))
        except RPCError:
            return None

    async def set_current(build_id: str, token: bytes) -> bytes:
        request = rr.SetWorkerDeploymentCurrentVersionRequest(
            namespace=ns, deployment_name=name, build_id=build_id, conflict_token=token
        )
        return (await service.set_worker_deployment_current_version(request)).conflict_token

    pollers = [asyncio.create_task(poll("1.0", 5)), asyncio.create_task(poll("2.0", 5))]
    token = b""
    for _ in range(100):
        try:
            described = await service.describe_worker_deployment(
                rr.DescribeWorkerDeploymentRequest(namespace=ns, deployment_name=name)
            )
        except RPCError:
            described = None
        if described is not None and len(described.worker_deployment_info.version_summaries) == 2:
            token = described.conflict_token
            break
        await asyncio.sleep(0.1)
    await asyncio.gather(*pollers)
    token = await set_current("1.0", token)
    await asyncio.sleep(1)  # the real server propagates routing to its matching partitions
    workflow_id = new_id("inline")
    await service.start_workflow_execution(
        rr.StartWorkflowExecutionRequest(
            namespace=ns,
            workflow_id=workflow_id,
            workflow_type=WorkflowType(name="Inline"),
            task_queue=TaskQueue(name=queue),
            request_id=str(uuid.uuid4()),
        )
    )
    first = await poll("1.0", 10)
    assert first is not None
    await set_current("2.0", token)
    await asyncio.sleep(1)
    await service.signal_workflow_execution(
        rr.SignalWorkflowExecutionRequest(
            namespace=ns,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
            signal_name="nudge",
            request_id=str(uuid.uuid4()),
        )
    )
    answer = await service.respond_workflow_task_completed(
        rr.RespondWorkflowTaskCompletedRequest(
            namespace=ns,
            task_token=first.task_token,
            identity="1.0",
            deployment_options=options("1.0"),
            versioning_behavior=VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE,
            return_new_workflow_task=True,
        )
    )
    queued = await poll("2.0", 3)
    eager = await service.start_workflow_execution(
        rr.StartWorkflowExecutionRequest(
            namespace=ns,
            workflow_id=new_id("eager"),
            workflow_type=WorkflowType(name="Inline"),
            task_queue=TaskQueue(name=queue),
            request_id=str(uuid.uuid4()),
            request_eager_execution=True,
            identity="a starter of no version",
        )
    )
    return {
        "handed back to 1.0": bool(answer.workflow_task.task_token),
        "queued for 2.0": queued is not None and bool(queued.task_token),
        "an eager start's task handed out": bool(eager.eager_workflow_task.task_token),
    }


async def test_the_task_a_completion_hands_back_is_not_rerouted_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        _story(both_clients["temporal"]), _story(both_clients["perdura"])
    )
    assert temporal == {
        "handed back to 1.0": True,
        "queued for 2.0": False,
        "an eager start's task handed out": True,
    }
    assert perdura == temporal
