"""Differential tests for what the newest SDK release found Perdura doing differently (issue 16): updates
around continue-as-new and a run's close, updates rejected on a speculative workflow task, and activities
that no worker polls.

Each scenario runs on the real Temporal dev server and on `perdura dev` at once, with the same workflow id
and task queue name, and compares what the client saw (results and errors) and the normalised history of
every run of the chain (tests/support/history_compare.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    RPCError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.worker import Worker

from tests.reference import scenarios as s
from tests.reference.test_differential import (
    ACTIVITIES,
    WORKFLOWS,
    count_events,
    start,
    types,
    wait_for_event,
)
from tests.reference.test_differential import compare as compare_plain
from tests.support.history_compare import assert_same_history, normalize

pytestmark = pytest.mark.reference

# (client, workflow id, task queue) -> (handle, what the client saw along the way)
Scenario = Callable[[Client, str, str], Awaitable[tuple[WorkflowHandle, dict[str, Any]]]]
WFT_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
WFT_STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED


async def seen(call: Awaitable[Any]) -> Any:
    """The call's result, or its error as the client saw it (type, message and cause), to compare."""
    try:
        return ("result", await call)
    except WorkflowUpdateFailedError as e:
        return ("update failed", f"{type(e.cause).__name__}: {e.cause}")
    except RPCError as e:
        return ("rpc error", e.status.name, e.message)


async def _run_on(client: Client, scenario: Scenario, workflow_id: str, task_queue: str):
    async with Worker(client, task_queue=task_queue, workflows=WORKFLOWS, activities=ACTIVITIES):
        handle, saw = await scenario(client, workflow_id, task_queue)
        saw["result"] = await asyncio.wait_for(seen(handle.result()), timeout=30)
        runs = []
        run_id: str | None = handle.first_execution_run_id
        while run_id:
            events = [
                e async for e in client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events()
            ]
            runs.append(normalize(events))
            last = events[-1]
            attrs = last.workflow_execution_continued_as_new_event_attributes
            run_id = (
                attrs.new_execution_run_id
                if last.HasField("workflow_execution_continued_as_new_event_attributes")
                else None
            )
    return saw, runs


async def compare(clients: dict[str, Client], scenario: Scenario) -> tuple[dict[str, Any], list[list[dict]]]:
    """Run `scenario` on both servers; assert that the client saw the same and that every run's history is
    the same; return what the client saw and the histories (of the reference)."""
    workflow_id = f"diff-{uuid.uuid4()}"
    task_queue = f"diff-tq-{uuid.uuid4()}"
    (ref_saw, ref_runs), (our_saw, our_runs) = await asyncio.gather(
        _run_on(clients["temporal"], scenario, workflow_id, task_queue),
        _run_on(clients["perdura"], scenario, workflow_id, task_queue),
    )
    assert our_saw == ref_saw
    assert len(our_runs) == len(ref_runs)
    for ref_history, our_history in zip(ref_runs, our_runs, strict=True):
        assert_same_history(ref_history, our_history)
    return ref_saw, ref_runs


async def hold_workflow_task(handle: WorkflowHandle) -> None:
    """Signal `hold` and return once the workflow task handling it has started (it stays in flight for
    about scenarios.BLOCK_SECONDS)."""
    started = await count_events(handle, WFT_STARTED)
    await handle.signal(s.HeldUpdatesWorkflow.hold)
    await wait_for_event(handle, WFT_STARTED, count=started + 1)


# ---------------------------------------------------------------------------------------------------------
# Updates admitted while a workflow task is in flight.


async def test_update_admitted_during_continue_as_new_lands_on_the_new_run(both_clients):
    # The task handling `hold` continues as new; the update it never saw must be handled by the new run
    # (the real server aborts it with a retryable error and the SDK sends it again, to the new run).
    async def scenario(client: Client, workflow_id: str, task_queue: str):
        handle = await client.start_workflow(
            s.HeldUpdatesWorkflow.run, args=[True], id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, WFT_COMPLETED)
        await hold_workflow_task(handle)
        update = await seen(handle.execute_update(s.HeldUpdatesWorkflow.add, "a"))
        await handle.signal(s.HeldUpdatesWorkflow.finish)
        return handle, {"update": update}

    saw, runs = await compare(both_clients, scenario)
    assert saw == {"update": ("result", 1), "result": ("result", ["a"])}
    assert len(runs) == 2
    assert types(runs[0])[-1] == "WorkflowExecutionContinuedAsNew"
    assert "WorkflowExecutionUpdateCompleted" in types(runs[1])


async def test_update_rejected_after_a_task_in_flight_leaves_no_trace(both_clients):
    # The update reaches the server while the task handling `hold` runs; the task that then carries it only
    # rejects it, and (speculative, as on the real server) leaves no event behind.
    async def scenario(client: Client, workflow_id: str, task_queue: str):
        handle = await client.start_workflow(
            s.HeldUpdatesWorkflow.run, args=[False], id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, WFT_COMPLETED)
        await hold_workflow_task(handle)
        rejected = await seen(handle.execute_update(s.HeldUpdatesWorkflow.add, ""))
        accepted = await seen(handle.execute_update(s.HeldUpdatesWorkflow.add, "a"))
        await handle.signal(s.HeldUpdatesWorkflow.finish)
        return handle, {"rejected": rejected, "accepted": accepted}

    saw, runs = await compare(both_clients, scenario)
    assert saw["rejected"] == ("update failed", "ApplicationError: ValueError: empty values are not allowed")
    assert types(runs[0]).count("WorkflowTaskCompleted") == 4  # start, hold, update "a", finish


# ---------------------------------------------------------------------------------------------------------
# An update accepted asynchronously, whose completion also completes the run.


async def test_update_accepted_async_ends_with_its_handlers_outcome(both_clients):
    async def scenario(client: Client, workflow_id: str, task_queue: str):
        handle = await client.start_workflow(
            s.FinishedByUpdateWorkflow.run, id=workflow_id, task_queue=task_queue
        )
        await wait_for_event(handle, WFT_COMPLETED)
        update = await handle.start_update(
            s.FinishedByUpdateWorkflow.finish, "x", wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        outcome = await seen(update.result())
        await handle.result()
        # A handle polled only after the run closed gets the same outcome.
        late = await seen(handle.get_update_handle(update.id).result())
        return handle, {"outcome": outcome, "after close": late}

    saw, runs = await compare(both_clients, scenario)
    assert saw["outcome"] == saw["after close"] == ("result", "X")
    assert types(runs[0])[-2:] == ["WorkflowExecutionUpdateCompleted", "WorkflowExecutionCompleted"]


# ---------------------------------------------------------------------------------------------------------
# An activity no worker polls: its schedule-to-start timeout defaults from schedule-to-close, and both
# expire at once; the real server times it out as SCHEDULE_TO_START.


@pytest.mark.parametrize("eager", [False, True])
async def test_unpolled_activity_times_out_schedule_to_start(both_clients, eager):
    # The worker runs workflows only (no activity pollers); with eager execution on, it may still ask
    # to run the activity itself.
    history = await compare_plain(
        both_clients,
        start(s.UnpolledActivityWorkflow.run),
        no_remote_activities=True,
        disable_eager_activity_execution=not eager,
    )
    timed_out = next(e for e in history if e["type"] == "ActivityTaskTimedOut")
    timeout_type = timed_out["attrs"]["failure"]["timeoutFailureInfo"]["timeoutType"]
    assert timeout_type == "TIMEOUT_TYPE_SCHEDULE_TO_START"
