"""Queries held for a workflow task in flight: handed out with the next task, answered in its completion.

Most tests play the worker by hand over raw gRPC, so the poll responses can be inspected: a query that
arrives while the run has a workflow task scheduled or running comes back in
PollWorkflowTaskQueueResponse.queries and is answered through RespondWorkflowTaskCompleted.query_results.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import QueryResultType, WorkflowTaskFailedCause
from temporalio.api.query.v1 import WorkflowQuery, WorkflowQueryResult
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    PollWorkflowTaskQueueRequest,
    PollWorkflowTaskQueueResponse,
    QueryWorkflowRequest,
    RespondQueryTaskCompletedRequest,
    RespondWorkflowTaskCompletedRequest,
    RespondWorkflowTaskFailedRequest,
)
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.e2e.conftest import event_types, new_id

QUERY_TIMEOUT = timedelta(seconds=15)


async def poll(client: Client, task_queue: str) -> PollWorkflowTaskQueueResponse:
    response = await client.workflow_service.poll_workflow_task_queue(
        PollWorkflowTaskQueueRequest(
            namespace="default", task_queue=TaskQueue(name=task_queue), identity="by-hand"
        )
    )
    assert response.task_token, "no workflow task came"
    return response


async def payloads(client: Client, value: object) -> Payloads:
    return Payloads(payloads=await client.data_converter.encode([value]))


async def complete(client: Client, task: PollWorkflowTaskQueueResponse, answers=None, **kwargs):
    """Complete a workflow task (no commands), answering the queries it carried."""
    results = {
        query_id: WorkflowQueryResult(
            result_type=QueryResultType.QUERY_RESULT_TYPE_ANSWERED, answer=await payloads(client, value)
        )
        for query_id, value in (answers or {}).items()
    }
    return await client.workflow_service.respond_workflow_task_completed(
        RespondWorkflowTaskCompletedRequest(
            namespace="default",
            task_token=task.task_token,
            identity="by-hand",
            query_results=results,
            **kwargs,
        )
    )


async def task_with_query(
    client: Client, task: PollWorkflowTaskQueueResponse
) -> PollWorkflowTaskQueueResponse:
    """Keep the workflow task going (task heartbeats: no events) until the held query rides one.

    The query call runs concurrently; this copes with it landing a little before or after the poll.
    """
    for _ in range(25):
        if task.queries:
            return task
        await asyncio.sleep(0.2)
        response = await complete(
            client, task, force_create_new_workflow_task=True, return_new_workflow_task=True
        )
        task = response.workflow_task
    raise AssertionError("the query never rode a workflow task")


def start_query(handle, query_type: str = "state") -> asyncio.Task:
    return asyncio.create_task(handle.query(query_type, rpc_timeout=QUERY_TIMEOUT))


async def test_query_before_the_first_task_rides_it_and_is_answered_in_its_completion(client, task_queue):
    """No task has completed yet: the query waits for the first one and comes back in its `queries`."""
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    task = await task_with_query(client, await poll(client, task_queue))
    [(query_id, query)] = task.queries.items()
    assert query.query_type == "state"
    assert not task.HasField("query"), "a workflow task, not a query task"
    await complete(client, task, {query_id: "answered in the completion"})
    assert await asyncio.wait_for(pending, 10) == "answered in the completion"
    await handle.terminate()
    assert not [t for t in await event_types(handle) if "QUERY" in t]


async def test_query_during_a_task_with_nothing_after_it_goes_out_as_a_query_task(client, task_queue):
    """The running task ends and no other follows: the held query is released to the queue on its own."""
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    await complete(client, await poll(client, task_queue))
    await handle.signal("poke")
    running = await poll(client, task_queue)
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    assert not pending.done(), "the query waits for the task in flight"
    await complete(client, running)
    legacy = await poll(client, task_queue)
    assert legacy.HasField("query")
    assert legacy.query.query_type == "state"
    assert not legacy.queries
    await client.workflow_service.respond_query_task_completed(
        RespondQueryTaskCompletedRequest(
            namespace="default",
            task_token=legacy.task_token,
            completed_type=QueryResultType.QUERY_RESULT_TYPE_ANSWERED,
            query_result=await payloads(client, "after the task"),
        )
    )
    assert await asyncio.wait_for(pending, 10) == "after the task"
    await handle.terminate()


async def test_query_rides_the_task_that_carries_the_signal_sent_before_it(client, task_queue):
    """A signal and then a query arrive during a task: the next task brings both, so the answer sees it."""
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    await complete(client, await poll(client, task_queue))
    await handle.signal("first")
    running = await poll(client, task_queue)
    await handle.signal("second")
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    await complete(client, running)
    task = await task_with_query(client, await poll(client, task_queue))
    signals = [
        e.workflow_execution_signaled_event_attributes.signal_name
        for e in task.history.events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert "second" in signals
    [query_id] = task.queries
    await complete(client, task, {query_id: "saw the second signal"})
    assert await asyncio.wait_for(pending, 10) == "saw the second signal"
    await handle.terminate()


async def test_failed_task_hands_its_queries_to_the_next_attempt(client, task_queue):
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    task = await task_with_query(client, await poll(client, task_queue))
    [query_id] = task.queries
    await client.workflow_service.respond_workflow_task_failed(
        RespondWorkflowTaskFailedRequest(
            namespace="default",
            task_token=task.task_token,
            cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE,
            identity="by-hand",
        )
    )
    assert not pending.done()
    retry = await poll(client, task_queue)
    assert retry.attempt == 2
    assert list(retry.queries) == [query_id]
    await complete(client, retry, {query_id: "second attempt"})
    assert await asyncio.wait_for(pending, 10) == "second attempt"
    await handle.terminate()


async def test_timed_out_task_hands_its_queries_to_the_next_attempt(client, task_queue):
    handle = await client.start_workflow(
        "ByHand", id=new_id(), task_queue=task_queue, task_timeout=timedelta(seconds=1)
    )
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    task = await task_with_query(client, await poll(client, task_queue))
    [query_id] = task.queries
    retry = await poll(client, task_queue)  # the worker went silent: the task times out after 1 s
    assert retry.attempt == 2
    assert list(retry.queries) == [query_id]
    await complete(client, retry, {query_id: "after a timeout"})
    assert await asyncio.wait_for(pending, 10) == "after a timeout"
    await handle.terminate()


async def test_one_query_at_a_time_is_held_and_a_run_closed_before_any_task_fails_it(client, task_queue):
    """As Temporal: one held query per run (the next is ResourceExhausted, which the SDK retries)."""
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    request = QueryWorkflowRequest(
        namespace="default",
        execution=WorkflowExecution(workflow_id=handle.id),
        query=WorkflowQuery(query_type="other"),
    )
    with pytest.raises(RPCError) as info:
        await client.workflow_service.query_workflow(request, retry=False, timeout=timedelta(seconds=5))
    assert info.value.status == RPCStatusCode.RESOURCE_EXHAUSTED
    assert "consistent query buffer is full" in info.value.message
    await handle.terminate()
    with pytest.raises(WorkflowQueryFailedError, match="closed before WorkflowTaskStarted"):
        await asyncio.wait_for(pending, 10)
    with pytest.raises(RPCError) as info:
        await client.workflow_service.query_workflow(request, retry=False, timeout=timedelta(seconds=5))
    assert info.value.status == RPCStatusCode.FAILED_PRECONDITION
    assert "closed before WorkflowTaskStarted" in info.value.message


@workflow.defn(sandboxed=False)
class BusyWorkflow:
    """Its signal handler holds the worker, so the workflow task stays in flight for a while."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @workflow.signal
    def note(self, value: str, busy_seconds: float) -> None:
        if busy_seconds and not workflow.unsafe.is_replaying():
            time.sleep(busy_seconds)
        self.seen.append(value)

    @workflow.query
    def notes(self) -> list[str]:
        return self.seen

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


async def test_sdk_query_during_a_busy_task_sees_every_signal_sent_before_it(client, task_queue):
    async with Worker(
        client, task_queue=task_queue, workflows=[BusyWorkflow], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(BusyWorkflow.run, id=new_id(), task_queue=task_queue)
        assert await handle.query(BusyWorkflow.notes) == []
        for round_ in range(3):
            await handle.signal(BusyWorkflow.note, args=[f"slow-{round_}", 0.4])
            await asyncio.sleep(0.1)
            await handle.signal(BusyWorkflow.note, args=[f"quick-{round_}", 0])
            seen = await handle.query(BusyWorkflow.notes)
            assert seen[-2:] == [f"slow-{round_}", f"quick-{round_}"]
        await handle.terminate()


async def test_query_and_poll_on_different_api_replicas(server, client, task_queue):
    """Production: the query waits on one `perdura api`, the task is polled and completed on another."""
    if not server.database_url:
        pytest.skip("one process in dev mode")
    other = await Client.connect(server.replica(), namespace="default")
    handle = await client.start_workflow("ByHand", id=new_id(), task_queue=task_queue)
    pending = start_query(handle)
    await asyncio.sleep(0.5)
    task = await task_with_query(other, await poll(other, task_queue))
    [query_id] = task.queries
    await complete(other, task, {query_id: "from the other replica"})
    assert await asyncio.wait_for(pending, 10) == "from the other replica"
    await handle.terminate()
