"""Standalone activities (client.start_activity) through the official SDK, on perdura dev and Postgres."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio import activity
from temporalio.api.activity.v1 import ActivityOptions
from temporalio.api.enums.v1 import ActivityExecutionStatus as ApiActivityStatus
from temporalio.api.enums.v1 import PendingActivityState as ApiPendingState
from temporalio.api.workflowservice.v1 import (
    DeleteActivityExecutionRequest,
    DescribeActivityExecutionRequest,
    PauseActivityExecutionRequest,
    StartActivityExecutionRequest,
    UnpauseActivityExecutionRequest,
    UpdateActivityExecutionOptionsRequest,
)
from temporalio.client import ActivityExecutionStatus, ActivityFailureError, Client, PendingActivityState
from temporalio.common import ActivityIDConflictPolicy, ActivityIDReusePolicy, RetryPolicy
from temporalio.exceptions import (
    ActivityAlreadyStartedError,
    ApplicationError,
    CancelledError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e import test_auth as auth_tests
from tests.e2e.conftest import new_id
from tests.e2e.test_auth import connect

tenants = auth_tests.tenants  # the fixture: two organisations and their keys, made once per server

_attempts: dict[str, list[int]] = defaultdict(list)
_started: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
FAST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_interval=timedelta(seconds=1))


@activity.defn
async def sa_flaky(key: str) -> str:
    """Fails its first attempt; the second returns what the first heartbeated."""
    info = activity.info()
    _attempts[key].append(info.attempt)
    if info.attempt == 1:
        activity.heartbeat(f"progress of {key}")
        raise ApplicationError("first attempt fails")
    return f"{info.heartbeat_details[0]} on attempt {info.attempt}"


@activity.defn
async def sa_sleepy(key: str) -> str:
    _attempts[key].append(activity.info().attempt)
    await asyncio.sleep(30)
    return "never"


@activity.defn
async def sa_until_cancelled(key: str) -> str:
    _started[key].set()
    while True:
        activity.heartbeat()
        await asyncio.sleep(0.1)


ACTIVITIES = [sa_flaky, sa_sleepy, sa_until_cancelled]


def _worker(client: Client, task_queue: str) -> Worker:
    return Worker(client, task_queue=task_queue, activities=ACTIVITIES)


async def test_an_activity_retries_once_then_completes_with_its_heartbeat_details(client, task_queue):
    """The first attempt fails after a heartbeat; the retry sees the heartbeat details and completes."""
    key = new_id("act")
    handle = await client.start_activity(
        sa_flaky,
        key,
        id=key,
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=10),
        retry_policy=FAST_RETRY,
    )
    desc = await handle.describe()
    assert desc.status == ActivityExecutionStatus.RUNNING
    assert desc.run_state == PendingActivityState.SCHEDULED
    assert desc.attempt == 1
    assert desc.activity_type == "sa_flaky"
    async with _worker(client, task_queue):
        assert await handle.result() == f"progress of {key} on attempt 2"
    assert _attempts[key] == [1, 2]
    desc = await handle.describe()
    assert desc.status == ActivityExecutionStatus.COMPLETED
    assert desc.attempt == 2
    assert desc.last_failure is None  # only asked for, as on the real server
    assert desc.close_time is not None
    assert desc.last_started_time is not None
    raw = await client.workflow_service.describe_activity_execution(
        DescribeActivityExecutionRequest(
            namespace=client.namespace,
            activity_id=key,
            include_last_failure=True,
            include_heartbeat_details=True,
            include_input=True,
            include_outcome=True,
        )
    )
    assert raw.info.last_failure.message == "first attempt fails"
    assert raw.info.heartbeat_details.payloads[0].data == f'"progress of {key}"'.encode()
    assert raw.input.payloads[0].data == f'"{key}"'.encode()
    assert raw.outcome.result.payloads[0].data == f'"progress of {key} on attempt 2"'.encode()
    assert raw.long_poll_token  # as the real server, even once closed (a poll with it answers at once)


async def test_start_to_close_timeouts_exhaust_the_retry_policy(client, task_queue):
    """Each attempt times out after its start-to-close timeout; after the last one the activity times out."""
    key = new_id("act")
    handle = await client.start_activity(
        sa_sleepy,
        key,
        id=key,
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=1),
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=2),
    )
    async with _worker(client, task_queue):
        with pytest.raises(ActivityFailureError) as failure:
            await handle.result()
    assert isinstance(failure.value.cause, TimeoutError)
    assert failure.value.cause.type == TimeoutType.START_TO_CLOSE
    assert _attempts[key] == [1, 2]
    desc = await handle.describe()
    assert desc.status == ActivityExecutionStatus.TIMED_OUT
    assert desc.attempt == 2


async def test_an_activity_nobody_polls_times_out_schedule_to_close(client, task_queue):
    handle = await client.start_activity(
        sa_flaky, "x", id=new_id("act"), task_queue=task_queue, schedule_to_close_timeout=timedelta(seconds=1)
    )
    with pytest.raises(ActivityFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, TimeoutError)
    assert (await handle.describe()).status == ActivityExecutionStatus.TIMED_OUT


async def test_cancel_before_any_worker_cancels_at_once_with_the_reason(client, task_queue):
    handle = await client.start_activity(
        sa_flaky, "x", id=new_id("act"), task_queue=task_queue, start_to_close_timeout=timedelta(seconds=5)
    )
    await handle.cancel(reason="not needed")
    with pytest.raises(ActivityFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, CancelledError)
    assert list(failure.value.cause.details) == ["not needed"]
    desc = await handle.describe()
    assert desc.status == ActivityExecutionStatus.CANCELED
    assert desc.canceled_reason == "not needed"
    with pytest.raises(RPCError) as again:
        await handle.cancel(reason="again")
    assert again.value.status == RPCStatusCode.FAILED_PRECONDITION


async def test_cancel_of_a_running_attempt_reaches_it_through_its_heartbeats(client, task_queue):
    key = new_id("act")
    handle = await client.start_activity(
        sa_until_cancelled,
        key,
        id=key,
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=timedelta(seconds=5),
    )
    async with _worker(client, task_queue):
        await asyncio.wait_for(_started[key].wait(), 10)
        await handle.cancel(reason="stop")
        assert (await handle.describe()).run_state in (PendingActivityState.CANCEL_REQUESTED, None)
        with pytest.raises(ActivityFailureError) as failure:
            await handle.result()
    assert isinstance(failure.value.cause, CancelledError)
    assert (await handle.describe()).status == ActivityExecutionStatus.CANCELED


async def test_terminate_closes_a_running_activity(client, task_queue):
    key = new_id("act")
    handle = await client.start_activity(
        sa_until_cancelled, key, id=key, task_queue=task_queue, start_to_close_timeout=timedelta(seconds=30)
    )
    async with _worker(client, task_queue):
        await asyncio.wait_for(_started[key].wait(), 10)
        await handle.terminate(reason="operator says so")
        with pytest.raises(ActivityFailureError) as failure:
            await handle.result()
    assert isinstance(failure.value.cause, TerminatedError)
    assert str(failure.value.cause) == "operator says so"
    assert (await handle.describe()).status == ActivityExecutionStatus.TERMINATED
    # The SDK sends no request id: the server gives each call its own, so a second one is refused.
    with pytest.raises(RPCError) as again:
        await handle.terminate(reason="twice")
    assert "already terminated with request ID" in again.value.message
    assert again.value.status == RPCStatusCode.FAILED_PRECONDITION


async def test_id_policies(client, task_queue):
    """Conflict FAIL and USE_EXISTING on a running activity; REJECT_DUPLICATE and ALLOW_DUPLICATE after it closed."""
    key = new_id("act")
    options = {"id": key, "task_queue": task_queue, "start_to_close_timeout": timedelta(seconds=5)}
    first = await client.start_activity(sa_flaky, key, retry_policy=FAST_RETRY, **options)
    with pytest.raises(ActivityAlreadyStartedError) as taken:
        await client.start_activity(
            sa_flaky, key, id_conflict_policy=ActivityIDConflictPolicy.FAIL, **options
        )
    assert taken.value.run_id == first.run_id
    same = await client.start_activity(
        sa_flaky, key, id_conflict_policy=ActivityIDConflictPolicy.USE_EXISTING, **options
    )
    assert same.run_id == first.run_id
    async with _worker(client, task_queue):
        await first.result()
    with pytest.raises(ActivityAlreadyStartedError):
        await client.start_activity(
            sa_flaky, key, id_reuse_policy=ActivityIDReusePolicy.REJECT_DUPLICATE, **options
        )
    with pytest.raises(ActivityAlreadyStartedError):
        await client.start_activity(
            sa_flaky, key, id_reuse_policy=ActivityIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, **options
        )
    second = await client.start_activity(sa_flaky, key, **options)
    assert second.run_id != first.run_id
    assert (await client.get_activity_handle(key).describe()).activity_run_id == second.run_id


async def test_activities_are_listed_and_counted_apart_from_workflows(client, task_queue):
    """An activity id may equal a workflow id; each list sees only its own kind."""
    shared = new_id("shared")
    await client.start_activity(
        sa_flaky, "x", id=shared, task_queue=task_queue, schedule_to_close_timeout=timedelta(minutes=5)
    )
    workflow = await client.start_workflow("NoSuchWorkflow", id=shared, task_queue=task_queue)
    listed = [a async for a in client.list_activities(f'ActivityId = "{shared}"')]
    assert [(a.activity_id, a.activity_type, a.task_queue, a.status) for a in listed] == [
        (shared, "sa_flaky", task_queue, ActivityExecutionStatus.RUNNING)
    ]
    assert (
        await client.count_activities(f'ActivityId = "{shared}" AND ActivityType = "sa_flaky"')
    ).count == 1
    grouped = await client.count_activities(f'ActivityId = "{shared}" GROUP BY ExecutionStatus')
    assert [(g.count, g.group_values) for g in grouped.groups] == [(1, ["Running"])]
    runs = [w async for w in client.list_workflows(f'WorkflowId = "{shared}"')]
    assert [r.run_id for r in runs] == [workflow.result_run_id]
    assert (await client.count_workflows(f'TaskQueue = "{task_queue}"')).count == 1
    with pytest.raises(RPCError) as bad:
        await client.count_activities("NoSuchAttribute = 1")
    assert bad.value.status == RPCStatusCode.INVALID_ARGUMENT


async def test_delete_removes_the_activity(client, task_queue):
    key = new_id("act")
    handle = await client.start_activity(
        sa_flaky, "x", id=key, task_queue=task_queue, start_to_close_timeout=timedelta(seconds=5)
    )
    service = client.workflow_service
    await service.delete_activity_execution(
        DeleteActivityExecutionRequest(
            namespace=client.namespace, activity_id=key, run_id=handle.run_id or ""
        )
    )
    with pytest.raises(RPCError) as gone:
        await handle.describe()
    assert gone.value.status == RPCStatusCode.NOT_FOUND
    assert (await client.count_activities(f'ActivityId = "{key}"')).count == 0


async def test_bad_requests_get_clear_errors(client, task_queue):
    service = client.workflow_service
    base = StartActivityExecutionRequest(
        namespace=client.namespace, activity_id=new_id("act"), request_id=str(uuid.uuid4())
    )
    base.activity_type.name = "sa_flaky"
    base.task_queue.name = task_queue
    cases = {
        "a valid StartToCloseTimeout or ScheduleToCloseTimeout": base,
        "activity ID is required": StartActivityExecutionRequest(namespace=client.namespace),
    }
    for message, request in cases.items():
        with pytest.raises(RPCError) as bad:
            await service.start_activity_execution(request)
        assert bad.value.status == RPCStatusCode.INVALID_ARGUMENT
        assert message in bad.value.message
    with pytest.raises(RPCError) as missing:
        await service.describe_activity_execution(
            DescribeActivityExecutionRequest(namespace=client.namespace, activity_id=new_id("none"))
        )
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    with pytest.raises(RPCError) as hidden:
        await client.get_workflow_handle("\x1fstandalone-activity\x1fx").describe()
    assert hidden.value.status == RPCStatusCode.INVALID_ARGUMENT


async def test_an_activity_is_reached_only_in_its_namespace(server, tenants):
    """Another tenant's key cannot name the namespace; in its own namespace the same id is another activity."""
    client_a = await connect(server, tenants.ns_a, tenants.keys["a-operator"])
    client_b = await connect(server, tenants.ns_b, tenants.keys["b"])
    key = new_id("tenant")
    handle = await client_a.start_activity(
        "anything", id=key, task_queue="tq-tenants", start_to_close_timeout=timedelta(seconds=30)
    )
    b_handle = client_b.get_activity_handle(key)
    with pytest.raises(RPCError) as missing:
        await b_handle.describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    with pytest.raises(RPCError) as missing:
        await b_handle.cancel(reason="not mine")
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    assert (await client_b.count_activities(f'ActivityId = "{key}"')).count == 0
    across = await connect(server, tenants.ns_a, tenants.keys["b"])  # b's key naming a's namespace
    with pytest.raises(RPCError) as denied:
        await across.get_activity_handle(key).terminate(reason="not mine")
    assert denied.value.status == RPCStatusCode.PERMISSION_DENIED
    assert (await handle.describe()).status == ActivityExecutionStatus.RUNNING
    await handle.terminate(reason="done")


async def test_describe_with_a_long_poll_token_waits_for_a_change(client, task_queue):
    """Describe with the token of an earlier answer returns once the activity changed (a worker took it)."""
    key = new_id("act")
    handle = await client.start_activity(
        sa_until_cancelled, key, id=key, task_queue=task_queue, start_to_close_timeout=timedelta(seconds=30)
    )
    first = await handle.describe()
    assert first.long_poll_token
    waiting = asyncio.create_task(handle.describe(long_poll_token=first.long_poll_token))
    await asyncio.sleep(1)
    assert not waiting.done()  # nothing changed yet
    async with _worker(client, task_queue):
        second = await asyncio.wait_for(waiting, 10)
        assert second.state_transition_count > first.state_transition_count
        assert second.run_state == PendingActivityState.STARTED
        await handle.terminate(reason="done")


async def test_operator_controls_reach_a_standalone_activity(client, task_queue):
    """Pause holds a standalone activity's attempt from workers until unpaused; update-options changes its
    start-to-close timeout; the *ActivityExecution calls name it without a workflow id."""
    key = new_id("act")
    handle = await client.start_activity(
        sa_flaky,
        key,
        id=key,
        task_queue=task_queue,
        start_to_close_timeout=timedelta(seconds=10),
        retry_policy=FAST_RETRY,
    )
    service = client.workflow_service
    by_id = {"namespace": client.namespace, "activity_id": key}
    await service.pause_activity_execution(PauseActivityExecutionRequest(**by_id, reason="hold"))
    # ACTIVITY_EXECUTION_STATUS_PAUSED, as Temporal's source maps a paused activity (SDK 1.31 cannot read it).
    raw = await service.describe_activity_execution(DescribeActivityExecutionRequest(**by_id))
    assert (raw.info.status, raw.info.run_state) == (
        ApiActivityStatus.ACTIVITY_EXECUTION_STATUS_PAUSED,
        ApiPendingState.PENDING_ACTIVITY_STATE_PAUSED,
    )
    await service.update_activity_execution_options(
        UpdateActivityExecutionOptionsRequest(
            **by_id,
            activity_options=ActivityOptions(start_to_close_timeout=Duration(seconds=20)),
            update_mask=FieldMask(paths=["start_to_close_timeout"]),
        )
    )
    async with _worker(client, task_queue):
        await asyncio.sleep(1.5)
        assert _attempts[key] == []  # paused: no worker got it
        await service.unpause_activity_execution(UnpauseActivityExecutionRequest(**by_id))
        assert await handle.result() == f"progress of {key} on attempt 2"
    raw = await service.describe_activity_execution(DescribeActivityExecutionRequest(**by_id))
    assert raw.info.status == ApiActivityStatus.ACTIVITY_EXECUTION_STATUS_COMPLETED
    assert raw.info.start_to_close_timeout.ToTimedelta() == timedelta(seconds=20)
