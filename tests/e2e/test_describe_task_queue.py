"""DescribeTaskQueue: the pollers of a queue (by type), its backlog, and what the `temporal` CLI shows."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e import workflows as w
from tests.e2e.conftest import new_id

WORKFLOW = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
ACTIVITY = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
ENHANCED = DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED
CLI = Path(sys.executable).parent / "temporal"


async def describe(client: Client, task_queue: str, **kwargs):
    return await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(namespace="default", task_queue=TaskQueue(name=task_queue), **kwargs),
        retry=False,
    )


async def pollers_of(client: Client, task_queue: str, queue_type: int) -> dict[str, object]:
    """Identity -> PollerInfo, once the worker's pollers have reached the server (they start polling async)."""
    for _ in range(50):
        response = await describe(client, task_queue, task_queue_type=queue_type)
        if response.pollers:
            return {p.identity: p for p in response.pollers}
        await asyncio.sleep(0.1)
    return {}


def worker(client: Client, task_queue: str, identity: str, **kwargs) -> Worker:
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[w.HelloWorkflow],
        activities=[w.greet],
        identity=identity,
        **kwargs,
    )


async def test_pollers_of_both_types_show_the_worker_identity(client, task_queue):
    async with worker(client, task_queue, "describe-me@host", max_task_queue_activities_per_second=7):
        assert await client.execute_workflow(w.HelloWorkflow.run, "you", id=new_id(), task_queue=task_queue)
        workflow_pollers = await pollers_of(client, task_queue, WORKFLOW)
        activity_pollers = await pollers_of(client, task_queue, ACTIVITY)
        default = await describe(client, task_queue)  # type unset: workflow
    assert set(workflow_pollers) == {"describe-me@host"}
    assert set(activity_pollers) == {"describe-me@host"}
    assert [p.identity for p in default.pollers] == ["describe-me@host"]
    poller = workflow_pollers["describe-me@host"]
    assert poller.rate_per_second == 100_000
    seen = poller.last_access_time.ToDatetime(tzinfo=UTC)
    assert datetime.now(UTC) - timedelta(minutes=1) < seen <= datetime.now(UTC) + timedelta(seconds=1)
    assert activity_pollers["describe-me@host"].rate_per_second == 7


async def test_enhanced_mode_reports_pollers_and_stats_per_type(client, task_queue):
    async with worker(client, task_queue, "enhanced@host"):
        await pollers_of(client, task_queue, ACTIVITY)
        response = await describe(
            client, task_queue, api_mode=ENHANCED, report_pollers=True, report_stats=True
        )
    [(build_id, version)] = response.versions_info.items()
    assert build_id == ""
    assert set(version.types_info) == {WORKFLOW, ACTIVITY}
    for info in version.types_info.values():
        assert [p.identity for p in info.pollers] == ["enhanced@host"]
        assert info.HasField("stats")


async def test_backlog_counts_tasks_nobody_took(client, task_queue):
    handle = await client.start_workflow(w.HelloWorkflow.run, "later", id=new_id(), task_queue=task_queue)
    response = await describe(client, task_queue, report_stats=True, include_task_queue_status=True)
    assert response.stats.approximate_backlog_count == 1
    assert response.task_queue_status.backlog_count_hint == 1
    assert not response.pollers
    activity = await describe(client, task_queue, task_queue_type=ACTIVITY, report_stats=True)
    assert activity.stats.approximate_backlog_count == 0
    await handle.terminate()


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({}, "taskQueue is not set"),
        ({"task_queue": TaskQueue(name="")}, "missing task queue name"),
        ({"task_queue": TaskQueue(name="x" * 1001)}, "taskQueue length exceeds limit"),
        (
            {
                "task_queue": TaskQueue(name="s", kind=TaskQueueKind.TASK_QUEUE_KIND_STICKY),
                "api_mode": ENHANCED,
            },
            "not valid for a sticky queue",
        ),
    ],
)
async def test_bad_requests_are_invalid_arguments(client, request_fields, message):
    with pytest.raises(RPCError) as info:
        await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(namespace="default", **request_fields), retry=False
        )
    assert info.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert message in info.value.message


async def test_every_api_replica_sees_every_poller(server, client, task_queue):
    """Production: a worker polls one `perdura api`; a describe served by another lists it (Redis)."""
    if not server.database_url:
        pytest.skip("one process in dev mode")
    other = await Client.connect(server.replica(), namespace="default")
    async with worker(client, task_queue, "replica-one@host"):
        assert set(await pollers_of(other, task_queue, WORKFLOW)) == {"replica-one@host"}
        assert set(await pollers_of(other, task_queue, ACTIVITY)) == {"replica-one@host"}


async def test_the_cli_lists_the_pollers(server, client, task_queue):
    if not CLI.exists():
        pytest.skip("the temporal CLI is not installed in this environment")
    async with worker(client, task_queue, "cli-shown@host"):
        await pollers_of(client, task_queue, ACTIVITY)
        await pollers_of(client, task_queue, WORKFLOW)
        result = await asyncio.to_thread(
            subprocess.run,
            [str(CLI), "task-queue", "describe", "--task-queue", task_queue, "--address", server.address],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "cli-shown@host" in line]
    assert {line.split()[1] for line in lines} == {"workflow", "activity"}


async def test_a_worker_that_shut_down_is_no_longer_listed(client, task_queue):
    """ShutdownWorker drops the worker's pollers at once (Temporal's removePollerFromHistory)."""
    async with worker(client, task_queue, "leaving@host"):
        assert set(await pollers_of(client, task_queue, ACTIVITY)) == {"leaving@host"}
    for queue_type in (WORKFLOW, ACTIVITY):
        assert not (await describe(client, task_queue, task_queue_type=queue_type)).pollers
