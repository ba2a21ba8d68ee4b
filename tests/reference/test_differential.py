"""Differential tests: the same workflow on the real Temporal dev server and on `perdura dev`, same histories.

Each scenario runs on both servers at once (asyncio.gather), with one SDK worker per server, the same
workflow id and the same (fresh) task queue name on both, so that the normalised histories
(tests/support/history_compare.py) must be equal event for event. The outcome the client sees (result or
error) must be equal too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.worker import Worker

from tests.e2e import workflows as w
from tests.reference import scenarios as s
from tests.support.history_compare import assert_same_history, normalize

pytestmark = pytest.mark.reference

WORKFLOWS = [*w.ALL_WORKFLOWS, *s.WORKFLOWS]
ACTIVITIES = [*w.ALL_ACTIVITIES, *s.ACTIVITIES]

# (client, workflow id, task queue) -> handle of the started run; the scenario drives it (signals, cancels...).
Scenario = Callable[[Client, str, str], Awaitable[WorkflowHandle]]


def _failure_chain(error: BaseException | None) -> list[str]:
    chain = []
    while error is not None:
        chain.append(f"{type(error).__name__}: {error}")
        error = error.__cause__
    return chain


async def _outcome(handle: WorkflowHandle) -> tuple[str, Any]:
    try:
        return ("result", await handle.result())
    except WorkflowFailureError as e:
        return ("failure", _failure_chain(e))


async def _run_on(
    client: Client, scenario: Scenario, workflow_id: str, task_queue: str, worker_options: dict[str, Any]
):
    async with Worker(
        client, task_queue=task_queue, workflows=WORKFLOWS, activities=ACTIVITIES, **worker_options
    ):
        handle = await scenario(client, workflow_id, task_queue)
        outcome = await asyncio.wait_for(_outcome(handle), timeout=30)
        history = [e async for e in handle.fetch_history_events()]
    return outcome, normalize(history)


async def run_both(clients: dict[str, Client], scenario: Scenario, **worker_options: Any):
    """Run `scenario` on both servers concurrently, with the same workflow id and task queue name on each
    (and workers made with these extra options). Returns ((temporal outcome, temporal history), (perdura outcome, perdura history)), histories normalised."""
    workflow_id = f"diff-{uuid.uuid4()}"
    task_queue = f"diff-tq-{uuid.uuid4()}"
    return await asyncio.gather(
        _run_on(clients["temporal"], scenario, workflow_id, task_queue, worker_options),
        _run_on(clients["perdura"], scenario, workflow_id, task_queue, worker_options),
    )


async def compare(clients: dict[str, Client], scenario: Scenario, **worker_options: Any) -> list[dict]:
    """Run `scenario` on both servers; assert equal histories and outcomes; return the (reference) history."""
    (ref_outcome, ref_history), (our_outcome, our_history) = await run_both(
        clients, scenario, **worker_options
    )
    assert_same_history(ref_history, our_history)
    assert our_outcome == ref_outcome
    return ref_history


async def count_events(handle: WorkflowHandle, event_type: int) -> int:
    return len([e async for e in handle.fetch_history_events() if e.event_type == event_type])


async def wait_for_event(
    handle: WorkflowHandle, event_type: int, count: int = 1, timeout: float = 15
) -> None:
    """Wait until the run's history holds `count` events of this type (to act at a known point)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await count_events(handle, event_type) >= count:
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"fewer than {count} {EventType.Name(event_type)} in {handle.id} after {timeout}s")


async def wait_for_activity_started(handle: WorkflowHandle, timeout: float = 15) -> None:
    """Wait until DescribeWorkflowExecution shows a started, heartbeating pending activity (no history event
    says so: ActivityTaskStarted is written only when the activity closes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = (await handle.describe()).raw_description.pending_activities
        started = pending and pending[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        if started and pending[0].HasField("last_heartbeat_time"):
            return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"no started activity in {handle.id} after {timeout}s")


def types(history: list[dict]) -> list[str]:
    return [e["type"] for e in history]


def start(workflow_run, *args) -> Scenario:
    """The plain scenario: start the workflow with these arguments and let it run to its end."""

    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        return await client.start_workflow(
            workflow_run, args=list(args), id=workflow_id, task_queue=task_queue
        )

    return scenario


# ---------------------------------------------------------------------------------------------------------
# Workflows that run to their end on their own.


async def test_hello_world(both_clients):
    history = await compare(both_clients, start(w.HelloWorkflow.run, "world"))
    assert len(history) == 11


async def test_ten_sequential_activities(both_clients):
    history = await compare(both_clients, start(w.SequenceWorkflow.run, 10))
    assert len(history) == 65


async def test_parallel_activities(both_clients):
    # Completions are staggered (scenarios.STAGGER_SECONDS apart) so that both servers see them in the same
    # order and at the same points relative to the workflow tasks; otherwise the interleaving of
    # ActivityTask{Started,Completed} with WorkflowTask events is timing-dependent on either server.
    history = await compare(both_clients, start(s.StaggeredParallelWorkflow.run, 3))
    assert types(history).count("ActivityTaskScheduled") == 3


def activity_outcomes(history: list[dict]) -> dict[str, tuple]:
    """Per activity id: (its ActivityTaskStarted attrs, closing event type, closing attrs), with the event-id
    references checked (the close names a Started event that names the close's Scheduled event) and then
    removed, so that the result does not depend on where the events landed in the history."""
    by_id = {e["id"]: e for e in history}
    outcomes = {}
    for close in history:
        if close["type"] not in ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut"):
            continue
        attrs = dict(close["attrs"])
        scheduled = by_id[int(attrs.pop("scheduledEventId"))]
        started = by_id[int(attrs.pop("startedEventId"))]
        assert started["type"] == "ActivityTaskStarted", close
        assert started["id"] < close["id"], close
        started_attrs = dict(started["attrs"])
        assert int(started_attrs.pop("scheduledEventId")) == scheduled["id"], started
        outcomes[scheduled["attrs"]["activityId"]] = (started_attrs, close["type"], attrs)
    return outcomes


async def test_parallel_activities_completing_together(both_clients):
    # Five activities complete at about the same time: where their Started/Completed pairs land among the
    # workflow-task events (and how many workflow tasks it takes) is timing-dependent on either server. So
    # compare exactly up to the last ActivityTaskScheduled, then the activity outcomes regardless of order,
    # then the closing event without its workflowTaskCompletedEventId.
    def canonical(history: list[dict]) -> tuple:
        last_scheduled = max(i for i, e in enumerate(history) if e["type"] == "ActivityTaskScheduled")
        close = history[-1]
        close_attrs = {k: v for k, v in close["attrs"].items() if k != "workflowTaskCompletedEventId"}
        return history[: last_scheduled + 1], activity_outcomes(history), close["type"], close_attrs

    (ref_outcome, ref_history), (our_outcome, our_history) = await run_both(
        both_clients, start(w.ParallelWorkflow.run, 5)
    )
    assert our_outcome == ref_outcome
    ref, ours = canonical(ref_history), canonical(our_history)
    assert_same_history(ref[0], ours[0])
    assert ours[1:] == ref[1:]
    assert len(ref[1]) == 5


async def test_activity_fails_twice_then_succeeds(both_clients):
    history = await compare(both_clients, start(w.RetryWorkflow.run, f"flaky-{uuid.uuid4()}"))
    (started,) = [e for e in history if e["type"] == "ActivityTaskStarted"]
    assert started["attrs"]["attempt"] == 3


async def test_non_retryable_failure(both_clients):
    history = await compare(both_clients, start(w.FatalWorkflow.run))
    assert types(history)[-1] == "WorkflowExecutionFailed"


async def test_start_to_close_timeout_then_retry(both_clients):
    history = await compare(both_clients, start(w.StartToCloseWorkflow.run))
    (started,) = [e for e in history if e["type"] == "ActivityTaskStarted"]
    assert started["attrs"]["attempt"] == 2


async def test_heartbeat_timeout(both_clients):
    history = await compare(both_clients, start(w.HeartbeatTimeoutWorkflow.run))
    assert "ActivityTaskTimedOut" in types(history)


async def test_timer_2s(both_clients):
    history = await compare(both_clients, start(w.TimerWorkflow.run, 2.0))
    assert "TimerFired" in types(history)


async def test_cancelled_timer(both_clients):
    history = await compare(both_clients, start(w.CancelledTimerWorkflow.run))
    assert "TimerCanceled" in types(history)


async def test_failing_workflow(both_clients):
    history = await compare(both_clients, start(w.FailingWorkflow.run))
    assert types(history)[-1] == "WorkflowExecutionFailed"


# ---------------------------------------------------------------------------------------------------------
# Workflows driven from the client at a known point (after their first workflow task completed).


async def test_signal_while_waiting(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.SignalWorkflow.run, 1, id=workflow_id, task_queue=task_queue)
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await handle.signal(w.SignalWorkflow.add, "a")
        return handle

    history = await compare(both_clients, scenario)
    assert types(history)[4] == "WorkflowExecutionSignaled"


async def test_signal_with_start(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        first = await client.start_workflow(
            w.SignalWorkflow.run,
            2,
            id=workflow_id,
            task_queue=task_queue,
            start_signal="add",
            start_signal_args=["1"],
        )
        await wait_for_event(first, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        # On a running workflow id, signal-with-start only signals the existing run.
        second = await client.start_workflow(
            w.SignalWorkflow.run,
            2,
            id=workflow_id,
            task_queue=task_queue,
            start_signal="add",
            start_signal_args=["2"],
        )
        assert second.result_run_id == first.result_run_id
        return first

    history = await compare(both_clients, scenario)
    assert types(history)[:3] == [
        "WorkflowExecutionStarted",
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
    ]


async def test_cancel_seen_by_workflow(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            w.WaitForCancelWorkflow.run, id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, EventType.EVENT_TYPE_TIMER_STARTED)
        await handle.cancel()
        return handle

    history = await compare(both_clients, scenario)
    assert types(history)[-2:] == ["TimerCanceled", "WorkflowExecutionCompleted"]


async def test_cancel_ends_workflow_canceled(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
        await wait_for_event(handle, EventType.EVENT_TYPE_TIMER_STARTED)
        await handle.cancel()
        return handle

    history = await compare(both_clients, scenario)
    assert types(history)[-2:] == ["TimerCanceled", "WorkflowExecutionCanceled"]


@pytest.mark.parametrize("reason", [None, "enough"])
async def test_terminate(both_clients, reason):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.LongSleepWorkflow.run, id=workflow_id, task_queue=task_queue)
        await wait_for_event(handle, EventType.EVENT_TYPE_TIMER_STARTED)
        await handle.terminate("detail", reason=reason)
        return handle

    history = await compare(both_clients, scenario)
    assert types(history)[-1] == "WorkflowExecutionTerminated"


async def test_cancel_activity_wait_cancellation_completed(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            w.CancelActivityWorkflow.run, id=workflow_id, task_queue=task_queue
        )
        await wait_for_activity_started(handle)
        await handle.cancel()
        return handle

    history = await compare(both_clients, scenario)
    assert "ActivityTaskCancelRequested" in types(history)


# ---------------------------------------------------------------------------------------------------------
# Events that reach the server while a workflow task is in flight (BusyWorkflow holds its task for a while).


async def hold_workflow_task(handle: WorkflowHandle) -> None:
    """Signal `block` and return once the workflow task handling it has started (and so is in flight for
    about scenarios.BLOCK_SECONDS)."""
    started = await count_events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    await handle.signal(s.BusyWorkflow.block)
    await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, count=started + 1)


async def test_signals_buffered_during_workflow_task(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            s.BusyWorkflow.run, args=[False, 2], id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await hold_workflow_task(handle)
        await handle.signal(s.BusyWorkflow.note, "a")
        await handle.signal(s.BusyWorkflow.note, "b")
        return handle

    await compare(both_clients, scenario)


async def test_completion_rejected_while_signal_buffered(both_clients):
    # The task handling `block` completes the workflow, but a signal arrived meanwhile: the real server
    # rejects the completion (WorkflowTaskFailed UNHANDLED_COMMAND) and the next task sees the signal.
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            s.BusyWorkflow.run, args=[False, 0], id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await hold_workflow_task(handle)
        await handle.signal(s.BusyWorkflow.note, "late")
        return handle

    history = await compare(both_clients, scenario)
    assert "WorkflowTaskFailed" in types(history)


async def test_activity_completion_and_signal_buffered_during_workflow_task(both_clients):
    # The activity completes, then a signal arrives, both while the task handling `block` is in flight.
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            s.BusyWorkflow.run, args=[True, 1], id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        await hold_workflow_task(handle)
        s.release(handle.result_run_id)
        await asyncio.sleep(0.2)  # let the worker report the completion
        await handle.signal(s.BusyWorkflow.note, "late")
        return handle

    await compare(both_clients, scenario)


# ---------------------------------------------------------------------------------------------------------
# Full workflow semantics: children, continue-as-new, retries, updates, queries, local activities.


async def test_child_workflow(both_clients):
    history = await compare(both_clients, start(w.ParentWorkflow.run, "kid"))
    assert "ChildWorkflowExecutionCompleted" in types(history)


async def test_parent_signals_and_cancels_children(both_clients):
    await compare(both_clients, start(w.SignalChildWorkflow.run))
    await compare(both_clients, start(w.CancelChildWorkflow.run))


async def test_continue_as_new_last_run(both_clients):
    history = await compare(both_clients, start(w.ContinueAsNewWorkflow.run, 2, 0))
    assert types(history)[0] == "WorkflowExecutionStarted"


async def test_workflow_retry_last_attempt(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        from datetime import timedelta

        from temporalio.common import RetryPolicy

        return await client.start_workflow(
            w.RetriedWorkflow.run,
            id=workflow_id,
            task_queue=task_queue,
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5),
        )

    await compare(both_clients, scenario)


async def test_updates_and_a_rejection(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.UpdatableWorkflow.run, id=workflow_id, task_queue=task_queue)
        # Update once the first task is done, so both servers see it at the same point of the run.
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        assert await handle.execute_update(w.UpdatableWorkflow.add, "a") == 1
        assert await handle.execute_update(w.UpdatableWorkflow.add, "b") == 2
        await handle.signal(w.UpdatableWorkflow.finish)
        return handle

    history = await compare(both_clients, scenario)
    assert types(history).count("WorkflowExecutionUpdateCompleted") == 2


async def test_rejected_updates_leave_no_trace(both_clients):
    from temporalio.client import WorkflowUpdateFailedError

    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.UpdatableWorkflow.run, id=workflow_id, task_queue=task_queue)
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        # Each rejection rides a speculative workflow task that the server then drops.
        for _ in range(2):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.execute_update(w.UpdatableWorkflow.add, "")
        assert await handle.execute_update(w.UpdatableWorkflow.add, "a") == 1
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(w.UpdatableWorkflow.add, "")
        await handle.signal(w.UpdatableWorkflow.finish)
        return handle

    history = await compare(both_clients, scenario)
    assert types(history).count("WorkflowExecutionUpdateAccepted") == 1


async def test_queries_write_nothing(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(w.CounterWorkflow.run, id=workflow_id, task_queue=task_queue)
        await wait_for_event(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await handle.signal(w.CounterWorkflow.bump)
        assert await handle.query(w.CounterWorkflow.current) == 1
        assert await handle.query(w.CounterWorkflow.current) == 1
        await handle.signal(w.CounterWorkflow.stop)
        return handle

    await compare(both_clients, scenario)


# ---------------------------------------------------------------------------------------------------------
# Reset: the new run's history is compared (the copied prefix, the failed task, what was reapplied).


async def wft_completed_ids(handle: WorkflowHandle) -> list[int]:
    return [
        e.event_id
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]


async def reset(client: Client, handle: WorkflowHandle, finish_event_id: int, **request) -> WorkflowHandle:
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

    response = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id, run_id=handle.result_run_id or ""),
            reason="differential reset",
            workflow_task_finish_event_id=finish_event_id,
            request_id=str(uuid.uuid4()),
            **request,
        )
    )
    return client.get_workflow_handle(handle.id, run_id=response.run_id)


async def _signals_and_update_then_reset(client: Client, workflow_id: str, task_queue: str, **request):
    handle = await client.start_workflow(
        w.ResettableWorkflow.run, args=[4, 0, 0], id=workflow_id, task_queue=task_queue
    )
    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    await wait_for_event(handle, completed, 1)
    await handle.signal(w.ResettableWorkflow.add, "a")
    await wait_for_event(handle, completed, 2)
    assert await handle.execute_update(w.ResettableWorkflow.push, "u") == 2
    await handle.signal(w.ResettableWorkflow.add, "b")
    await wait_for_event(handle, completed, 4)
    first = (await wft_completed_ids(handle))[0]
    new = await reset(client, handle, first, **request)
    # Let the new run take in what was reapplied before more arrives, so both servers see the same order.
    await wait_for_event(new, completed, 1)
    return new


async def test_reset_reapplies_signals_and_updates(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        new = await _signals_and_update_then_reset(client, workflow_id, task_queue)
        await new.signal(w.ResettableWorkflow.add, "c")
        return new

    history = await compare(both_clients, scenario)
    assert types(history)[3:7] == [
        "WorkflowTaskFailed",
        "WorkflowExecutionSignaled",
        "WorkflowExecutionUpdateAdmitted",
        "WorkflowExecutionSignaled",
    ]


async def test_reset_without_reapply(both_clients):
    from temporalio.api.enums.v1 import ResetReapplyType

    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        new = await _signals_and_update_then_reset(
            client, workflow_id, task_queue, reset_reapply_type=ResetReapplyType.RESET_REAPPLY_TYPE_NONE
        )
        for index, value in enumerate(["c", "d", "e", "f"], start=2):
            await new.signal(w.ResettableWorkflow.add, value)
            await wait_for_event(new, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, index)
        return new

    history = await compare(both_clients, scenario)
    assert "WorkflowExecutionUpdateAdmitted" not in types(history)


async def test_reset_completed_run_to_first_task(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        handle = await client.start_workflow(
            w.HelloWorkflow.run, "again", id=workflow_id, task_queue=task_queue
        )
        await handle.result()
        return await reset(client, handle, (await wft_completed_ids(handle))[0])

    history = await compare(both_clients, scenario)
    assert types(history)[-1] == "WorkflowExecutionCompleted"


async def test_reset_with_pending_activity_and_timer(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str) -> WorkflowHandle:
        # The activity takes 3 s and the timer 2 s: both are pending at the reset point.
        handle = await client.start_workflow(
            w.ResettableWorkflow.run, args=[1, 3.0, 2.0], id=workflow_id, task_queue=task_queue
        )
        completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        await wait_for_event(handle, completed, 1)
        await handle.signal(w.ResettableWorkflow.add, "go")
        await wait_for_event(handle, completed, 2)
        return await reset(client, handle, (await wft_completed_ids(handle))[1])

    history = await compare(both_clients, scenario)
    assert {"TimerFired", "ActivityTaskCompleted"} <= set(types(history))
