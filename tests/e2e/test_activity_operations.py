"""Operator calls on pending activities (pause, unpause, reset, update options) through the official SDK, both modes."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import defaultdict
from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio import activity, workflow
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.common.v1 import RetryPolicy, WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    PauseActivityRequest,
    ResetActivityRequest,
    UnpauseActivityRequest,
    UpdateActivityOptionsRequest,
)
from temporalio.common import RetryPolicy as SdkRetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import events, new_id
from tests.support.reference import TEMPORAL

ACTIVITY_NOT_FOUND = (
    "Can't find pending activity with such ID. Invalid activityID or activity already completed"
)
_attempts: dict[str, list[int]] = defaultdict(list)
_release: set[str] = set()


@activity.defn
async def op_echo(value: str) -> str:
    return f"echo {value}"


@activity.defn
async def op_heartbeat_until_cancelled(key: str) -> str:
    """Heartbeats until the server's answer cancels it; then reports why (paused / reset) or re-raises."""
    info = activity.info()
    _attempts[key].append(info.attempt)
    if key in _release:
        return f"done on attempt {info.attempt}"
    try:
        while True:
            activity.heartbeat(info.attempt)
            await asyncio.sleep(0.1)
    except asyncio.CancelledError:
        details = activity.cancellation_details()
        if key.startswith("raise"):
            raise
        return f"paused={details.paused} reset={details.reset}" if details else "no details"


@activity.defn
async def op_fail_until_released(key: str) -> str:
    _attempts[key].append(activity.info().attempt)
    if key not in _release:
        raise ApplicationError("not yet")
    return f"released on attempt {activity.info().attempt}"


@workflow.defn(sandboxed=False)
class OperatedWorkflow:
    @workflow.run
    async def run(self, name: str, arg: str, queue: str, initial_interval: float) -> str:
        return await workflow.execute_activity(
            name,
            arg,
            activity_id="act",
            task_queue=queue,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=10),
            retry_policy=SdkRetryPolicy(
                initial_interval=timedelta(seconds=initial_interval), maximum_interval=timedelta(seconds=100)
            ),
        )


ACTIVITIES = [op_echo, op_heartbeat_until_cancelled, op_fail_until_released]


@pytest.fixture
async def workflow_worker(client, task_queue):
    async with Worker(client, task_queue=task_queue, workflows=[OperatedWorkflow]) as running:
        yield running


def activity_worker(client, queue: str) -> Worker:
    # Heartbeats go out often, so a pause or reset reaches a running attempt quickly.
    return Worker(
        client,
        task_queue=queue,
        activities=ACTIVITIES,
        max_heartbeat_throttle_interval=timedelta(milliseconds=200),
        default_heartbeat_throttle_interval=timedelta(milliseconds=200),
    )


def seconds(value: float) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(seconds=value))
    return out


async def start(client, task_queue, name: str, arg: str, queue: str, initial_interval: float = 0.2):
    return await client.start_workflow(
        OperatedWorkflow.run, args=[name, arg, queue, initial_interval], id=new_id(), task_queue=task_queue
    )


def execution(handle) -> WorkflowExecution:
    return WorkflowExecution(workflow_id=handle.id)


async def pending(handle):
    """The run's pending activity "act" as describe shows it (None once it is gone)."""
    for info in (await handle.describe()).raw_description.pending_activities:
        if info.activity_id == "act":
            return info
    return None


async def until(check, timeout: float = 15):
    """Poll `check` (async, returns a value or None) until it returns something."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached in time")


async def pending_where(handle, predicate, timeout: float = 15):
    async def check():
        info = await pending(handle)
        return info if info is not None and predicate(info) else None

    return await until(check, timeout)


async def test_pause_holds_a_scheduled_activity_until_unpaused(client, task_queue, workflow_worker):
    queue = f"{task_queue}-acts"
    handle = await start(client, task_queue, "op_echo", "hi", queue)
    await pending_where(handle, lambda i: True)
    await client.workflow_service.pause_activity(
        PauseActivityRequest(
            namespace="default", execution=execution(handle), id="act", identity="ops", reason="deploy"
        )
    )
    info = await pending(handle)
    assert info.paused
    assert info.state == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
    assert (info.pause_info.manual.identity, info.pause_info.manual.reason) == ("ops", "deploy")
    assert info.pause_info.HasField("pause_time")
    assert info.activity_options.task_queue.name == queue
    async with activity_worker(client, queue):
        await asyncio.sleep(1.5)  # a worker polls the queue, but nothing is dispatched while paused
        info = await pending(handle)
        assert (info.state, info.attempt) == (PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED, 1)
        await client.workflow_service.unpause_activity(
            UnpauseActivityRequest(namespace="default", execution=execution(handle), id="act")
        )
        assert await handle.result() == "echo hi"
    types = [e.event_type for e in await events(handle)]
    assert types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) == 1
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED not in types


async def test_pausing_a_running_attempt_cancels_it_and_the_next_attempt_waits(
    client, task_queue, workflow_worker
):
    key = new_id("raise")
    queue = f"{task_queue}-acts"
    async with activity_worker(client, queue):
        handle = await start(client, task_queue, "op_heartbeat_until_cancelled", key, queue)
        await pending_where(handle, lambda i: i.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)
        await client.workflow_service.pause_activity(
            PauseActivityRequest(
                namespace="default", execution=execution(handle), type="op_heartbeat_until_cancelled"
            )
        )
        # The heartbeat answer cancels the attempt; its failure is kept but not retried while paused.
        info = await pending_where(handle, lambda i: i.attempt == 2)
        assert info.state == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
        assert info.last_failure.message
        await asyncio.sleep(1)
        assert _attempts[key] == [1]
        _release.add(key)
        await client.workflow_service.unpause_activity(
            UnpauseActivityRequest(namespace="default", execution=execution(handle), id="act")
        )
        assert await handle.result() == "done on attempt 2"
    assert _attempts[key] == [1, 2]


async def test_a_paused_attempt_that_completes_still_counts(client, task_queue, workflow_worker):
    queue = f"{task_queue}-acts"
    async with activity_worker(client, queue):
        handle = await start(client, task_queue, "op_heartbeat_until_cancelled", new_id("catch"), queue)
        await pending_where(handle, lambda i: i.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)
        await client.workflow_service.pause_activity(
            PauseActivityRequest(namespace="default", execution=execution(handle), id="act")
        )
        assert await handle.result() == "paused=True reset=False"


async def test_reset_of_a_running_attempt_is_reported_to_it(client, task_queue, workflow_worker):
    queue = f"{task_queue}-acts"
    async with activity_worker(client, queue):
        handle = await start(client, task_queue, "op_heartbeat_until_cancelled", new_id("catch"), queue)
        await pending_where(handle, lambda i: i.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)
        await client.workflow_service.reset_activity(
            ResetActivityRequest(namespace="default", execution=execution(handle), id="act")
        )
        assert await handle.result() == "paused=False reset=True"


async def test_reset_of_an_activity_in_backoff_runs_attempt_1_at_once(client, task_queue, workflow_worker):
    key = new_id("backoff")
    queue = f"{task_queue}-acts"
    async with activity_worker(client, queue):
        handle = await start(client, task_queue, "op_fail_until_released", key, queue, initial_interval=60)
        info = await pending_where(handle, lambda i: i.attempt == 2)
        assert info.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        assert info.HasField("next_attempt_schedule_time")
        _release.add(key)
        await client.workflow_service.reset_activity(
            ResetActivityRequest(namespace="default", execution=execution(handle), match_all=True)
        )
        assert await asyncio.wait_for(handle.result(), 20) == "released on attempt 1"
    (started,) = [
        e for e in await events(handle) if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert started.activity_task_started_event_attributes.attempt == 1


async def test_update_options_moves_a_pending_activity_to_another_queue(client, task_queue, workflow_worker):
    handle = await start(client, task_queue, "op_echo", "moved", f"{task_queue}-nobody")
    await pending_where(handle, lambda i: True)
    queue = f"{task_queue}-acts"
    response = await client.workflow_service.update_activity_options(
        UpdateActivityOptionsRequest(
            namespace="default",
            execution=execution(handle),
            id="act",
            activity_options=ActivityOptions(
                task_queue=TaskQueue(name=queue), retry_policy=RetryPolicy(maximum_attempts=4)
            ),
            update_mask=FieldMask(paths=["task_queue.name", "retry_policy.maximum_attempts"]),
        )
    )
    options = response.activity_options
    assert options.task_queue.name == queue
    assert options.retry_policy.maximum_attempts == 4
    assert options.start_to_close_timeout.ToTimedelta() == timedelta(seconds=30)
    info = await pending(handle)
    assert info.activity_options.task_queue.name == queue
    assert info.maximum_attempts == 4
    async with activity_worker(client, queue):
        assert await handle.result() == "echo moved"


async def test_restore_original_options(client, task_queue, workflow_worker):
    handle = await start(client, task_queue, "op_echo", "x", f"{task_queue}-nobody")
    await pending_where(handle, lambda i: True)
    request = UpdateActivityOptionsRequest(
        namespace="default",
        execution=execution(handle),
        id="act",
        activity_options=ActivityOptions(start_to_close_timeout=seconds(5)),
        update_mask=FieldMask(paths=["start_to_close_timeout"]),
    )
    await client.workflow_service.update_activity_options(request)
    assert (await pending(handle)).activity_options.start_to_close_timeout.ToTimedelta() == timedelta(
        seconds=5
    )
    restored = await client.workflow_service.update_activity_options(
        UpdateActivityOptionsRequest(
            namespace="default", execution=execution(handle), id="act", restore_original=True
        )
    )
    assert restored.activity_options.start_to_close_timeout.ToTimedelta() == timedelta(seconds=30)
    assert (await pending(handle)).activity_options.start_to_close_timeout.ToTimedelta() == timedelta(
        seconds=30
    )
    await handle.terminate("test over")


async def test_bad_requests_are_refused_as_temporal_refuses_them(client, task_queue, workflow_worker):
    handle = await start(client, task_queue, "op_echo", "x", f"{task_queue}-nobody")
    await pending_where(handle, lambda i: True)
    svc = client.workflow_service

    async def error(call) -> RPCError:
        with pytest.raises(RPCError) as caught:
            await call
        return caught.value

    e = await error(
        svc.pause_activity(PauseActivityRequest(namespace="default", execution=execution(handle)))
    )
    assert (e.status, e.message) == (
        RPCStatusCode.INVALID_ARGUMENT,
        "Either Activity.Id or Activity.Type should be set on request.",
    )
    e = await error(svc.pause_activity(PauseActivityRequest(namespace="default", id="act")))
    assert (e.status, e.message) == (RPCStatusCode.INVALID_ARGUMENT, "WorkflowId is not set on request.")
    e = await error(
        svc.reset_activity(ResetActivityRequest(namespace="default", execution=execution(handle), id="nope"))
    )
    assert (e.status, e.message) == (RPCStatusCode.NOT_FOUND, ACTIVITY_NOT_FOUND)
    await svc.pause_activity(
        PauseActivityRequest(namespace="default", execution=execution(handle), id="act", request_id="one")
    )
    e = await error(
        svc.pause_activity(
            PauseActivityRequest(namespace="default", execution=execution(handle), id="act", request_id="two")
        )
    )
    assert (e.status, e.message) == (RPCStatusCode.FAILED_PRECONDITION, "activity is already paused")
    e = await error(
        svc.update_activity_options(
            UpdateActivityOptionsRequest(
                namespace="default", execution=execution(handle), id="act", activity_options=ActivityOptions()
            )
        )
    )
    assert (e.status, e.message) == (RPCStatusCode.INVALID_ARGUMENT, "UpdateMask is not provided")
    await handle.terminate("test over")
    e = await error(
        svc.unpause_activity(
            UnpauseActivityRequest(namespace="default", execution=execution(handle), id="act")
        )
    )
    assert (e.status, e.message) == (RPCStatusCode.NOT_FOUND, "workflow execution already completed")


def cli(server, handle, *args: str) -> str:
    result = subprocess.run(
        [str(TEMPORAL), "activity", *args, "--address", server.address, "--workflow-id", handle.id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_cli_pause_and_unpause(client, task_queue, workflow_worker, server):
    queue = f"{task_queue}-acts"
    handle = await start(client, task_queue, "op_echo", "cli", queue)
    await pending_where(handle, lambda i: True)
    await asyncio.to_thread(cli, server, handle, "pause", "--activity-id", "act", "--reason", "from the cli")
    info = await pending(handle)
    assert info.paused
    assert info.pause_info.manual.reason == "from the cli"
    async with activity_worker(client, queue):
        await asyncio.to_thread(cli, server, handle, "unpause", "--activity-id", "act")
        assert await handle.result() == "echo cli"


async def test_cli_update_options_and_reset(client, task_queue, workflow_worker, server):
    handle = await start(client, task_queue, "op_echo", "cli", f"{task_queue}-nobody")
    await pending_where(handle, lambda i: True)
    queue = f"{task_queue}-acts"
    await asyncio.to_thread(
        cli,
        server,
        handle,
        "update-options",
        "--activity-id",
        "act",
        "--task-queue",
        queue,
        "--retry-maximum-attempts",
        "9",
    )
    info = await pending(handle)
    assert (info.activity_options.task_queue.name, info.maximum_attempts) == (queue, 9)
    await asyncio.to_thread(cli, server, handle, "pause", "--activity-id", "act")
    await asyncio.to_thread(cli, server, handle, "reset", "--activity-id", "act", "--keep-paused")
    assert (await pending(handle)).paused
    async with activity_worker(client, queue):
        await asyncio.to_thread(cli, server, handle, "reset", "--activity-id", "act")
        assert await handle.result() == "echo cli"
