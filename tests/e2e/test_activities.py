"""Activities through the official SDK: results, retries, failures and timeouts, on both storage modes."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType, RetryState
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError, TimeoutType

from tests.e2e import workflows as w
from tests.e2e.conftest import event_types, events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_hello_world_history_matches_temporal(client, task_queue):
    handle = await client.start_workflow(w.HelloWorkflow.run, "world", id=new_id(), task_queue=task_queue)
    assert await handle.result() == "hello world"
    assert await event_types(handle) == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_SCHEDULED",
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "WORKFLOW_EXECUTION_COMPLETED",
    ]


async def test_ten_sequential_activities(client, task_queue):
    handle = await client.start_workflow(w.SequenceWorkflow.run, 10, id=new_id(), task_queue=task_queue)
    assert await handle.result() == 10
    types = await event_types(handle)
    assert types.count("ACTIVITY_TASK_COMPLETED") == 10
    assert len(types) == 65  # as the real server writes it: 5 + 10 * 6


async def test_parallel_activities(client, task_queue):
    handle = await client.start_workflow(w.ParallelWorkflow.run, 5, id=new_id(), task_queue=task_queue)
    assert await handle.result() == [f"hello n{i}" for i in range(5)]
    history = await events(handle)
    scheduled = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    completed = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert len(scheduled) == len(completed) == 5
    # Every completion names its own started event, which directly precedes it.
    by_id = {e.event_id: e for e in history}
    for c in completed:
        attrs = c.activity_task_completed_event_attributes
        assert by_id[attrs.started_event_id].event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        assert by_id[attrs.started_event_id].activity_task_started_event_attributes.scheduled_event_id == (
            attrs.scheduled_event_id
        )
    assert [e.event_id for e in history] == list(range(1, len(history) + 1))


async def test_activity_retried_server_side_without_events_until_success(client, task_queue):
    key = new_id("flaky")
    handle = await client.start_workflow(w.RetryWorkflow.run, key, id=new_id(), task_queue=task_queue)
    assert await handle.result() == "ok after 3"
    history = await events(handle)
    types = [e.event_type for e in history]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED not in types
    (started,) = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
    attrs = started.activity_task_started_event_attributes
    assert attrs.attempt == 3
    assert attrs.last_failure.message == "flaky failure 2"
    (scheduled,) = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    # Backoff 0.2 s then 0.4 s before attempt 3 could start.
    waited = started.event_time.ToDatetime() - scheduled.event_time.ToDatetime()
    assert waited.total_seconds() >= 0.6


async def test_non_retryable_failure_reaches_the_workflow(client, task_queue):
    handle = await client.start_workflow(w.FatalWorkflow.run, id=new_id(), task_queue=task_queue)
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    activity_error = info.value.cause
    assert isinstance(activity_error, ActivityError)
    assert isinstance(activity_error.cause, ApplicationError)
    assert activity_error.cause.type == "MyFatal"
    (failed,) = [e for e in await events(handle) if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert (
        failed.activity_task_failed_event_attributes.retry_state
        == RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE
    )


async def test_start_to_close_timeout_then_retry(client, task_queue):
    handle = await client.start_workflow(w.StartToCloseWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.result() == 2
    (started,) = [
        e for e in await events(handle) if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    attrs = started.activity_task_started_event_attributes
    assert attrs.attempt == 2
    assert attrs.last_failure.message == "activity StartToClose timeout"
    assert attrs.last_failure.source == "Server"


async def test_heartbeat_timeout_carries_last_details(client, task_queue):
    handle = await client.start_workflow(w.HeartbeatTimeoutWorkflow.run, id=new_id(), task_queue=task_queue)
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    timeout = info.value.cause.cause
    assert isinstance(timeout, TimeoutError)
    assert timeout.type == TimeoutType.HEARTBEAT
    assert list(timeout.last_heartbeat_details) == ["hb-detail-1"]


async def test_async_activity_completed_by_id(client, task_queue):
    import asyncio

    handle = await client.start_workflow(w.AsyncActivityWorkflow.run, id=new_id(), task_queue=task_queue)
    external = client.get_async_activity_handle(workflow_id=handle.id, run_id=None, activity_id="external")
    for _ in range(50):
        try:
            await external.heartbeat("still going")
            break
        except Exception:  # noqa: BLE001 - not started yet
            await asyncio.sleep(0.1)
    await external.complete("done from outside")
    assert await handle.result() == "done from outside"


async def test_local_activities_and_patches_are_markers(client, task_queue):
    handle = await client.start_workflow(
        w.LocalActivityWorkflow.run, new_id("flaky-local"), id=new_id(), task_queue=task_queue
    )
    assert await handle.result() == ["hello local", "ok after 3", "True"]
    markers = [e for e in await events(handle) if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    names = [m.marker_recorded_event_attributes.marker_name for m in markers]
    assert names.count("core_local_activity") == 2
    assert names.count("core_patch") == 1
