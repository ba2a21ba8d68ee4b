"""Timers, signals, signal-with-start, cancellation, termination and failure through the official SDK."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

from tests.e2e import workflows as w
from tests.e2e.conftest import event_types, events, new_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_two_second_timer(client, task_queue):
    started = time.monotonic()
    handle = await client.start_workflow(w.TimerWorkflow.run, 2.0, id=new_id(), task_queue=task_queue)
    assert await handle.result() == "woke"
    assert time.monotonic() - started >= 2.0
    history = await events(handle)
    (timer_started,) = [e for e in history if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    (fired,) = [e for e in history if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED]
    assert fired.timer_fired_event_attributes.started_event_id == timer_started.event_id
    elapsed = fired.event_time.ToDatetime() - timer_started.event_time.ToDatetime()
    assert 2.0 <= elapsed.total_seconds() < 3.5


async def test_cancelled_timer(client, task_queue):
    handle = await client.start_workflow(w.CancelledTimerWorkflow.run, id=new_id(), task_queue=task_queue)
    assert await handle.result() == "cancelled"
    types = await event_types(handle)
    assert types.count("TIMER_STARTED") == 2
    assert types.count("TIMER_FIRED") == 1
    assert types.count("TIMER_CANCELED") == 1


async def test_signal_while_waiting(client, task_queue):
    handle = await client.start_workflow(w.SignalWorkflow.run, 1, id=new_id(), task_queue=task_queue)
    await asyncio.sleep(0.5)
    await handle.signal(w.SignalWorkflow.add, "late")
    assert await handle.result() == ["late"]


async def test_burst_of_signals_none_lost(client, task_queue):
    """Signals racing the workflow's own tasks are buffered, never dropped."""
    handle = await client.start_workflow(w.SignalWorkflow.run, 30, id=new_id(), task_queue=task_queue)
    await asyncio.gather(*(handle.signal(w.SignalWorkflow.add, f"s{i}") for i in range(30)))
    assert sorted(await handle.result()) == sorted(f"s{i}" for i in range(30))
    history = await events(handle)
    assert [e.event_id for e in history] == list(range(1, len(history) + 1))
    assert sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in history) == 30


async def test_signal_with_start_new_and_existing(client, task_queue):
    workflow_id = new_id()
    first = await client.start_workflow(
        w.SignalWorkflow.run,
        2,
        id=workflow_id,
        task_queue=task_queue,
        start_signal="add",
        start_signal_args=["a"],
    )
    second = await client.start_workflow(
        w.SignalWorkflow.run,
        2,
        id=workflow_id,
        task_queue=task_queue,
        start_signal="add",
        start_signal_args=["b"],
    )
    assert first.result_run_id == second.result_run_id
    assert await first.result() == ["a", "b"]
    types = await event_types(first)
    assert types[:3] == [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_EXECUTION_SIGNALED",
        "WORKFLOW_TASK_SCHEDULED",
    ]


async def test_cancel_is_seen_by_the_workflow(client, task_queue):
    handle = await client.start_workflow(w.WaitForCancelWorkflow.run, id=new_id(), task_queue=task_queue)
    await asyncio.sleep(0.5)
    await handle.cancel()
    assert await handle.result() == "saw cancellation"
    types = await event_types(handle)
    assert "WORKFLOW_EXECUTION_CANCEL_REQUESTED" in types
    assert "TIMER_CANCELED" in types


async def test_cancel_reaches_a_heartbeating_activity(client, task_queue):
    handle = await client.start_workflow(w.CancelActivityWorkflow.run, id=new_id(), task_queue=task_queue)
    await asyncio.sleep(1.0)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert isinstance(info.value.cause, CancelledError)
    types = await event_types(handle)
    assert types[-1] == "WORKFLOW_EXECUTION_CANCELED"
    assert "ACTIVITY_TASK_CANCEL_REQUESTED" in types
    assert "ACTIVITY_TASK_CANCELED" in types
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


async def test_terminate(client, task_queue):
    handle = await client.start_workflow(w.LongSleepWorkflow.run, id=new_id(), task_queue=task_queue)
    await asyncio.sleep(0.5)
    await handle.terminate("some detail", reason="enough")
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert isinstance(info.value.cause, TerminatedError)
    history = await events(handle)
    last = history[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
    assert last.workflow_execution_terminated_event_attributes.reason == "enough"
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_failing_workflow(client, task_queue):
    handle = await client.start_workflow(w.FailingWorkflow.run, id=new_id(), task_queue=task_queue)
    with pytest.raises(WorkflowFailureError) as info:
        await handle.result()
    assert isinstance(info.value.cause, ApplicationError)
    assert info.value.cause.message == "workflow says no"
    assert (await event_types(handle))[-1] == "WORKFLOW_EXECUTION_FAILED"


async def test_result_waits_on_a_long_poll(client, task_queue):
    """handle.result() is a GetWorkflowExecutionHistory long-poll: it returns as soon as the run closes."""
    handle = await client.start_workflow(w.TimerWorkflow.run, 1.5, id=new_id(), task_queue=task_queue)
    started = time.monotonic()
    assert await handle.result() == "woke"
    assert time.monotonic() - started < 4.0


async def test_describe_running_workflow(client, task_queue):
    handle = await client.start_workflow(w.LongSleepWorkflow.run, id=new_id(), task_queue=task_queue)
    await asyncio.sleep(0.5)
    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.RUNNING
    assert description.workflow_type == "LongSleepWorkflow"
    assert description.task_queue == task_queue
    assert description.history_length >= 5
    await handle.terminate()


async def test_run_and_execution_timeouts(client, task_queue):
    from datetime import timedelta

    from temporalio.api.enums.v1 import RetryState
    from temporalio.exceptions import TimeoutError as TemporalTimeoutError

    run_limited = await client.start_workflow(
        w.LongSleepWorkflow.run, id=new_id(), task_queue=task_queue, run_timeout=timedelta(seconds=1)
    )
    execution_limited = await client.start_workflow(
        w.LongSleepWorkflow.run, id=new_id(), task_queue=task_queue, execution_timeout=timedelta(seconds=1)
    )
    for handle, retry_state in (
        (run_limited, RetryState.RETRY_STATE_RETRY_POLICY_NOT_SET),
        (execution_limited, RetryState.RETRY_STATE_TIMEOUT),
    ):
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        assert isinstance(info.value.cause, TemporalTimeoutError)
        last = (await events(handle))[-1]
        assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT
        assert last.workflow_execution_timed_out_event_attributes.retry_state == retry_state
        assert (await handle.describe()).status == WorkflowExecutionStatus.TIMED_OUT


async def test_memo_given_at_start_and_upserted_by_the_workflow(client, task_queue):
    handle = await client.start_workflow(
        w.MemoWorkflow.run, id=new_id(), task_queue=task_queue, memo={"stage": "one", "drop": "me", "keep": 1}
    )
    for _ in range(50):
        memo = await (await handle.describe()).memo()
        if memo.get("stage") == "two":
            break
        await asyncio.sleep(0.1)
    assert memo == {"stage": "two", "keep": 1}
    assert "WORKFLOW_PROPERTIES_MODIFIED" in await event_types(handle)
    await handle.terminate()


async def test_workflow_retry_policy(client, task_queue):
    from datetime import timedelta

    from temporalio.api.enums.v1 import ContinueAsNewInitiator, RetryState
    from temporalio.common import RetryPolicy

    workflow_id = new_id()
    handle = await client.start_workflow(
        w.RetriedWorkflow.run,
        id=workflow_id,
        task_queue=task_queue,
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5),
    )
    assert await handle.result() == "attempt 3"
    first = client.get_workflow_handle(workflow_id, run_id=handle.result_run_id)
    failed = (await events(first))[-1].workflow_execution_failed_event_attributes
    assert failed.retry_state == RetryState.RETRY_STATE_IN_PROGRESS
    second = client.get_workflow_handle(workflow_id, run_id=failed.new_execution_run_id)
    started = (await events(second))[0].workflow_execution_started_event_attributes
    assert started.attempt == 2
    assert started.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY
    assert started.continued_failure.message == "attempt 1 fails"
    assert started.first_execution_run_id == handle.result_run_id


async def test_history_in_reverse_and_delete(client, task_queue):
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import (
        DeleteWorkflowExecutionRequest,
        GetWorkflowExecutionHistoryReverseRequest,
    )
    from temporalio.service import RPCError, RPCStatusCode

    handle = await client.start_workflow(w.SequenceWorkflow.run, 3, id=new_id(), task_queue=task_queue)
    await handle.result()
    forward = [e.event_id for e in await events(handle)]
    backward, token = [], b""
    while True:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace="default",
                execution=WorkflowExecution(workflow_id=handle.id),
                maximum_page_size=4,
                next_page_token=token,
            )
        )
        backward.extend(e.event_id for e in page.history.events)
        token = page.next_page_token
        if not token:
            break
    assert backward == list(reversed(forward))
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace="default", workflow_execution=WorkflowExecution(workflow_id=handle.id)
        )
    )
    with pytest.raises(RPCError) as info:
        await handle.describe()
    assert info.value.status == RPCStatusCode.NOT_FOUND


async def test_eager_workflow_start(client, task_queue):
    """The first workflow task comes back with the start response, to the client's own worker."""
    handle = await client.start_workflow(
        w.HelloWorkflow.run, "eager", id=new_id(), task_queue=task_queue, request_eager_start=True
    )
    assert getattr(handle, "__temporal_eagerly_started")  # noqa: B009 - the SDK sets it under this literal name
    assert await handle.result() == "hello eager"


async def test_health_check(client):
    assert await client.service_client.check_health()


async def test_user_metadata_on_start_and_timers(client, task_queue):
    handle = await client.start_workflow(
        w.TimerWorkflow.run,
        0.1,
        id=new_id(),
        task_queue=task_queue,
        static_summary="a summary",
        static_details="some details",
    )
    await handle.result()
    first = (await events(handle))[0]
    assert b"a summary" in first.user_metadata.summary.data
    description = await handle.describe()
    assert await description.static_summary() == "a summary"
    assert await description.static_details() == "some details"


async def test_cancel_and_terminate_honour_first_execution_run_id(client, task_queue):
    import uuid

    from temporalio.service import RPCError, RPCStatusCode

    handle = await client.start_workflow(w.WaitForCancelWorkflow.run, id=new_id(), task_queue=task_queue)
    # A handle from another chain of this workflow id reaches nothing.
    stranger = client.get_workflow_handle(handle.id, first_execution_run_id=str(uuid.uuid4()))
    for call in (stranger.cancel, stranger.terminate):
        with pytest.raises(RPCError) as error:
            await call()
        assert error.value.status == RPCStatusCode.NOT_FOUND
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    own = client.get_workflow_handle(handle.id, first_execution_run_id=handle.result_run_id)
    await own.terminate("by its own chain")
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
