"""Differential build-id test: a worker's build id, without worker deployments, as the real Temporal dev
server and `perdura dev` record it and as `workflow.info().get_current_build_id()` reads it back.

The story: a worker with build id 1.0 runs a run's first workflow task and stops; a worker with build id
1.1 answers a query on it (replaying the 1.0 task), then runs its next tasks. What the real server does
(Server 1.32.0), asserted below so this file states it:
- the query answers 1.0 until a 1.1 worker completes a task, then 1.1;
- every WorkflowTaskStarted and WorkflowTaskCompleted carries the worker's build id in `worker_version`
  (the SDK stamps it because both servers claim build-id based versioning), and so does
  ActivityTaskStarted, whether the activity was polled or started eagerly;
- the run's `BuildIds` search attribute lists both build ids behind the `unversioned` sentinel;
- the deprecated version-set and rules APIs are refused with PermissionDenied, and the Deployments of
  v0.30 with Unimplemented, with the same messages.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import Deployment
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import BuildIdOpAddNewDefault, Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.worker import Worker

from tests.e2e.conftest import new_id

pytestmark = pytest.mark.reference


@workflow.defn
class BuildIdStages:
    def __init__(self) -> None:
        self.stage = 0

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.stage >= 1)
        await workflow.wait_condition(lambda: self.stage >= 2)
        return workflow.info().get_current_build_id()

    @workflow.signal
    def advance(self) -> None:
        self.stage += 1

    @workflow.query
    def build_id(self) -> str:
        return workflow.info().get_current_build_id()


@activity.defn
async def echo(text: str) -> str:
    return text


@workflow.defn
class OneActivity:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(echo, "a", start_to_close_timeout=timedelta(seconds=10))


async def _activity_stamps(client: Client, *, eager: bool) -> list[str]:
    queue = new_id("build-id-activity")
    async with Worker(
        client,
        task_queue=queue,
        workflows=[OneActivity],
        activities=[echo],
        build_id="2.0",
        disable_eager_activity_execution=not eager,
    ):
        handle = await client.start_workflow(OneActivity.run, id=new_id("build-id"), task_queue=queue)
        await handle.result()
    return [
        event.activity_task_started_event_attributes.worker_version.build_id
        async for event in handle.fetch_history_events()
        if event.HasField("activity_task_started_event_attributes")
    ]


async def _query_until(handle: WorkflowHandle, want: str) -> str:
    answer = ""
    for _ in range(100):
        answer = await handle.query(BuildIdStages.build_id)
        if answer == want:
            break
        await asyncio.sleep(0.1)
    return answer


async def _stamps(handle: WorkflowHandle) -> list[tuple[str, str]]:
    """(event type, worker_version.build_id) of each workflow task Started and Completed event."""
    out = []
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_started_event_attributes"):
            out.append(
                (
                    EventType.Name(event.event_type),
                    event.workflow_task_started_event_attributes.worker_version.build_id,
                )
            )
        elif event.HasField("workflow_task_completed_event_attributes"):
            attrs = event.workflow_task_completed_event_attributes
            out.append((EventType.Name(event.event_type), attrs.worker_version.build_id))
    return out


async def _story(client: Client) -> dict[str, Any]:
    queue = new_id("build-id")
    async with Worker(client, task_queue=queue, workflows=[BuildIdStages], build_id="1.0"):
        handle = await client.start_workflow(BuildIdStages.run, id=new_id("build-id"), task_queue=queue)
        on_first = await handle.query(BuildIdStages.build_id)
    # The 1.0 worker is gone; its sticky queue would hold the next task until the sticky timeout.
    await client.workflow_service.reset_sticky_task_queue(
        rr.ResetStickyTaskQueueRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )
    async with Worker(client, task_queue=queue, workflows=[BuildIdStages], build_id="1.1"):
        replayed_by_new = await handle.query(BuildIdStages.build_id)
        await handle.signal(BuildIdStages.advance)
        after_new_task = await _query_until(handle, "1.1")
        await handle.signal(BuildIdStages.advance)
        result = await handle.result()
    described = await handle.describe()
    attributes = described.raw_description.workflow_execution_info.search_attributes.indexed_fields
    return {
        "on first worker": on_first,
        "replayed by the new worker": replayed_by_new,
        "after the new worker's task": after_new_task,
        "result": result,
        "stamps": await _stamps(handle),
        "search attributes": {name: json.loads(p.data) for name, p in attributes.items()},
    }


async def _refusal(client: Client) -> list[tuple[str, str]]:
    answers = []
    deployment = Deployment(series_name="orders", build_id="1.0")
    for call in (
        lambda: client.update_worker_build_id_compatibility(new_id("tq"), BuildIdOpAddNewDefault("1.0")),
        lambda: client.workflow_service.describe_deployment(
            rr.DescribeDeploymentRequest(namespace=client.namespace, deployment=deployment)
        ),
    ):
        try:
            await call()
        except RPCError as refused:
            answers.append((refused.status.name, refused.message))
        else:
            answers.append(("OK", ""))
    return answers


async def test_the_current_build_id_and_the_task_events_stamps_match_the_real_server(both_clients):
    stories = {name: await _story(client) for name, client in both_clients.items()}
    temporal = stories["temporal"]
    assert temporal["on first worker"] == "1.0"
    assert temporal["replayed by the new worker"] == "1.0"
    assert temporal["after the new worker's task"] == "1.1"
    assert temporal["result"] == "1.1"
    started, completed = "EVENT_TYPE_WORKFLOW_TASK_STARTED", "EVENT_TYPE_WORKFLOW_TASK_COMPLETED"
    assert temporal["stamps"][:2] == [(started, "1.0"), (completed, "1.0")]
    assert {build_id for _, build_id in temporal["stamps"][2:]} == {"1.1"}
    assert temporal["search attributes"] == {
        "BuildIds": ["unversioned", "unversioned:1.0", "unversioned:1.1"]
    }
    assert stories["perdura"] == temporal


@pytest.mark.parametrize("eager", [False, True], ids=["polled", "eager"])
async def test_an_activity_started_event_carries_its_workers_build_id(both_clients, eager):
    stamps = {name: await _activity_stamps(client, eager=eager) for name, client in both_clients.items()}
    assert stamps["temporal"] == ["2.0"]
    assert stamps["perdura"] == stamps["temporal"]


async def test_the_deprecated_build_id_apis_are_refused_as_by_the_real_server(both_clients):
    answers = {name: await _refusal(client) for name, client in both_clients.items()}
    assert [status for status, _ in answers["temporal"]] == ["PERMISSION_DENIED", "UNIMPLEMENTED"]
    assert answers["perdura"] == answers["temporal"]
