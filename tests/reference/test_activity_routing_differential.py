"""Differential worker-deployment routing of activity tasks: one story told to the real Temporal dev server
and to `perdura dev`, the same observations.

The story: workers of versions 1.0 and 2.0 of one deployment poll one task queue (workflows and
activities, eager activities off so every activity goes through the queue), and an unversioned worker
polls a second queue with activities only; 1.0 is current; a pinned and an auto-upgrade run start on 1.0
and wait; 2.0 is made current; both runs are signalled and run an activity on each queue. What the real
server does (Server 1.32.0), asserted below so this file states it:
- the pinned run's activity on its own queue runs on 1.0, its version, though 2.0 is current;
- the auto-upgrade run's activity runs on 2.0, the version its workflow task moved to;
- an activity on a queue no version of the deployment polls runs on that queue's unversioned worker;
- each run's search attributes name the version and behaviour in force, the versions it used and its
  build ids (`BuildIds`, `TemporalUsedWorkerDeploymentVersions`, `TemporalWorkerDeployment...`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, visible

pytestmark = pytest.mark.reference

TIMEOUT = timedelta(seconds=20)


def _activity(answer: str):
    @activity.defn(name="which_build")
    async def which_build() -> str:
        return answer

    return which_build


class _TwoActivities:
    def __init__(self) -> None:
        self.go = False

    async def _both(self, other_queue: str) -> list[str]:
        await workflow.wait_condition(lambda: self.go)
        own = await workflow.execute_activity("which_build", start_to_close_timeout=TIMEOUT, result_type=str)
        other = await workflow.execute_activity(
            "which_build", task_queue=other_queue, start_to_close_timeout=TIMEOUT, result_type=str
        )
        return [own, other]

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


@workflow.defn(name="ActivitiesPinned", versioning_behavior=VersioningBehavior.PINNED)
class ActivitiesPinned(_TwoActivities):
    @workflow.run
    async def run(self, other_queue: str) -> list[str]:
        return await self._both(other_queue)


@workflow.defn(name="ActivitiesAuto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class ActivitiesAuto(_TwoActivities):
    @workflow.run
    async def run(self, other_queue: str) -> list[str]:
        return await self._both(other_queue)


def _versioned(client: Client, queue: str, version: WorkerDeploymentVersion, answer: str) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[ActivitiesPinned, ActivitiesAuto],
        activities=[_activity(answer)],
        deployment_config=WorkerDeploymentConfig(version=version, use_worker_versioning=True),
        disable_eager_activity_execution=True,
    )


async def activity_routing_story(client: Client) -> dict[str, Any]:
    name = deployment = new_id("activity-routing")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue, other_queue = new_id("tq"), new_id("tq-plain")
    async with (
        _versioned(client, queue, v1, "v1"),
        _versioned(client, queue, v2, "v2"),
        Worker(client, task_queue=other_queue, activities=[_activity("unversioned")]),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        pinned = await client.start_workflow(ActivitiesPinned.run, other_queue, id=new_id(), task_queue=queue)
        auto = await client.start_workflow(ActivitiesAuto.run, other_queue, id=new_id(), task_queue=queue)
        # Both have run their first workflow task on 1.0 before the routing changes.
        for handle in (pinned, auto):
            async for event in handle.fetch_history_events(wait_new_event=True):
                if event.HasField("workflow_task_completed_event_attributes"):
                    break
        await set_current(client, v2, token)
        await asyncio.sleep(1)  # the real server propagates routing to its matching partitions
        await pinned.signal(ActivitiesPinned.proceed)
        await auto.signal(ActivitiesAuto.proceed)
        results = {"pinned": await pinned.result(), "auto": await auto.result()}
    for name, handle in (("pinned", pinned), ("auto", auto)):
        described = await handle.describe()
        fields = described.raw_description.workflow_execution_info.search_attributes.indexed_fields
        attributes = {key: json.loads(p.data) for key, p in fields.items()}
        results[f"{name} attributes"] = {
            key: value.replace(deployment, "<deployment>")
            if isinstance(value, str)
            else [v.replace(deployment, "<deployment>") for v in value]
            for key, value in attributes.items()
        }
    return results


async def test_activity_tasks_follow_their_runs_version_as_on_the_real_server(both_clients):
    temporal, perdura = await asyncio.gather(
        activity_routing_story(both_clients["temporal"]), activity_routing_story(both_clients["perdura"])
    )
    assert {k: temporal[k] for k in ("pinned", "auto")} == {
        "pinned": ["v1", "unversioned"],
        "auto": ["v2", "unversioned"],
    }
    assert temporal["pinned attributes"]["TemporalWorkerDeploymentVersion"] == "<deployment>:1.0"
    assert temporal["pinned attributes"]["TemporalWorkflowVersioningBehavior"] == "Pinned"
    assert temporal["auto attributes"]["TemporalWorkflowVersioningBehavior"] == "AutoUpgrade"
    assert perdura == temporal
