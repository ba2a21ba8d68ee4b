"""Task routing by worker deployment version, with the official SDK: new runs go to the current version
(or the ramping one), pinned runs stay on the version they started on, auto-upgrade runs move to the new
current version, and runs pinned to a version never reach other pollers."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.api.common.v1 import WorkflowType
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import VersioningOverride
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.common import PinnedVersioningOverride, RetryPolicy, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker, WorkerDeploymentConfig

from tests.e2e import deployment_workflows as dw
from tests.e2e.conftest import new_id
from tests.e2e.test_worker_deployments import set_current, set_ramping, visible
from tests.reference.test_activity_routing_differential import activity_routing_story


def worker(client: Client, queue: str, version: WorkerDeploymentVersion, *workflows: type) -> Worker:
    config = WorkerDeploymentConfig(version=version, use_worker_versioning=True)
    return Worker(client, task_queue=queue, workflows=list(workflows), deployment_config=config)


async def test_pinned_runs_stay_and_auto_upgrade_runs_move_to_the_new_current_version(client: Client):
    name = new_id("routing")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with (
        worker(client, queue, v1, dw.PinnedV1, dw.AutoV1),
        worker(client, queue, v2, dw.PinnedV2, dw.AutoV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        pinned = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        auto = await client.start_workflow("RoutedAuto", id=new_id(), task_queue=queue)
        # Both ran their first task on the current version, 1.0 (a query is answered where the run is routed).
        assert await pinned.query("build") == "v1"
        assert await auto.query("build") == "v1"

        await set_current(client, v2, token)
        assert await pinned.query("build") == "v1"
        await pinned.signal("finish")
        await auto.signal("finish")
        assert await pinned.result() == "v1"
        assert await auto.result() == "v2"
        fresh = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        await fresh.signal("finish")
        assert await fresh.result() == "v2"


async def test_a_full_ramp_sends_new_runs_to_the_ramping_version_and_none_sends_them_to_current(
    client: Client,
):
    name = new_id("ramp")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with (
        worker(client, queue, v1, dw.PinnedV1),
        worker(client, queue, v2, dw.PinnedV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        token = (await set_ramping(client, v2, 100, token)).conflict_token
        for expected in ("v2", "v2"):
            run = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
            await run.signal("finish")
            assert await run.result() == expected
        await set_ramping(client, v2, 0, token)
        run = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        await run.signal("finish")
        assert await run.result() == "v1"


async def test_without_a_current_version_versioned_workers_take_no_new_runs(client: Client):
    version = WorkerDeploymentVersion(deployment_name=new_id("idle"), build_id="1.0")
    queue = new_id("tq")
    async with worker(client, queue, version, dw.PinnedV1):
        described = await visible(client, version)
        run = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
        await asyncio.sleep(1.5)
        assert (await run.describe()).raw_description.pending_workflow_task.attempt == 1
        history = [e.event_type async for e in run.fetch_history_events()]
        assert len(history) == 2  # started and scheduled: no poller took it
        # Making the version current hands it the waiting task.
        await set_current(client, version, described.conflict_token)
        await run.signal("finish")
        assert await run.result() == "v1"


async def test_a_pinned_override_keeps_an_auto_upgrade_run_on_its_version(client: Client):
    name = new_id("override")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with (
        worker(client, queue, v1, dw.AutoV1),
        worker(client, queue, v2, dw.AutoV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v2, (await visible(client, v1)).conflict_token)).conflict_token
        run = await client.start_workflow(
            "RoutedAuto", id=new_id(), task_queue=queue, versioning_override=PinnedVersioningOverride(v1)
        )
        assert await run.query("build") == "v1"
        await set_current(client, v1, token)
        await run.signal("finish")
        assert await run.result() == "v1"
        started = [e async for e in run.fetch_history_events()][0].workflow_execution_started_event_attributes
        assert started.versioning_override.pinned.version.build_id == "1.0"


async def test_an_incomplete_override_is_refused(client: Client):
    request = StartWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_id=new_id(),
        workflow_type=WorkflowType(name="RoutedAuto"),
        task_queue=TaskQueue(name=new_id("tq")),
        request_id=new_id("req"),
        versioning_override=VersioningOverride(pinned=VersioningOverride.PinnedOverride(behavior=1)),
    )
    with pytest.raises(RPCError) as refused:
        await client.workflow_service.start_workflow_execution(request, retry=False)
    assert refused.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert refused.value.message == "must provide version if override is pinned."


async def _continued(client: Client, how: str) -> tuple[str, object]:
    """A pinned 1.0 run told that 2.0 became current continues as new `how`; its chain's result and the
    first run's versioning info."""
    name = new_id("continuing")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with worker(client, queue, v1, dw.ContinuingV1), worker(client, queue, v2, dw.ContinuingV2):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        run = await client.start_workflow("RoutedContinuing", how, id=new_id(), task_queue=queue)
        for _ in range(100):
            info = (await run.describe()).raw_description.workflow_execution_info.versioning_info
            if info.deployment_version.build_id:
                break
            await asyncio.sleep(0.1)
        await set_current(client, v2, token)
        return await run.result(), info


async def test_a_pinned_run_learns_its_target_moved_and_continues_onto_it_with_auto_upgrade(client: Client):
    result, info = await _continued(client, "auto")
    assert result == "v2"
    assert info.deployment_version.build_id == "1.0"
    assert info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_PINNED


async def test_a_pinned_run_continued_as_new_without_a_behaviour_stays_on_its_version(client: Client):
    result, _ = await _continued(client, "pinned")
    assert result == "v1"


async def test_a_run_routed_to_one_version_reaches_its_waiting_poller_at_once(client: Client):
    """A new task wakes one waiting poller of each version on the queue. Woken alone, a poller of the other
    version left the task for its own pollers, which found it only at their 5 s re-check (the SDK's
    test_worker_deployment_ramp then saw a single version). On Postgres both woken pollers race for the
    row: the one that finds it held by the other's claim looks again 50 ms later, not at the re-check
    (three runs in four took 5 s before)."""
    name = new_id("wake")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with (
        worker(client, queue, v1, dw.PinnedV1),
        worker(client, queue, v2, dw.PinnedV2),
    ):
        await visible(client, v2)
        token = (await set_current(client, v1, (await visible(client, v1)).conflict_token)).conflict_token
        await set_ramping(client, v2, 100, token)
        await asyncio.sleep(1)  # every poller of both workers is waiting
        loop = asyncio.get_running_loop()
        took = []
        for _ in range(4):
            began = loop.time()
            run = await client.start_workflow("RoutedPinned", id=new_id(), task_queue=queue)
            await run.signal("finish")
            assert await run.result() == "v2"
            took.append(loop.time() - began)
        assert max(took) < 4.0, took


async def test_a_pinned_runs_activities_stay_on_its_version_and_an_auto_upgrade_runs_move(client: Client):
    """The story of tests/reference/test_activity_routing_differential.py (where the real server tells it)
    on both servers: before activity tasks were routed, any poller of the queue took them, and a pinned
    run's activity ran on the new current version three times in four."""
    told = await activity_routing_story(client)
    assert {k: told[k] for k in ("pinned", "auto")} == {
        "pinned": ["v1", "unversioned"],
        "auto": ["v2", "unversioned"],
    }
    assert told["pinned attributes"]["TemporalWorkerDeploymentVersion"] == "<deployment>:1.0"


async def test_a_pinning_override_is_kept_by_the_runs_retry(client: Client):
    """Temporal's rule: a retry keeps the run's pinning override, so it runs on the pinned version though
    another is current (before, the retry started without it and went to the current version)."""
    name = new_id("retried")
    v1 = WorkerDeploymentVersion(deployment_name=name, build_id="1.0")
    v2 = WorkerDeploymentVersion(deployment_name=name, build_id="2.0")
    queue = new_id("tq")
    async with worker(client, queue, v1, dw.RetriedV1), worker(client, queue, v2, dw.RetriedV2):
        await visible(client, v1)
        await set_current(client, v2, (await visible(client, v2)).conflict_token)
        run = await client.start_workflow(
            "RetriedAuto",
            id=new_id(),
            task_queue=queue,
            versioning_override=PinnedVersioningOverride(v1),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=2),
        )
        assert await run.result() == "v1"
        described = await run.describe()
        override = described.raw_description.workflow_execution_info.versioning_info.versioning_override
        assert override.pinned.version.build_id == "1.0"
