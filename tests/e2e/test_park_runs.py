"""Park-and-redrive of a whole run through the official SDK: a workflow that fails every attempt, with
maximum_attempts=2 and a `perdura-on-retries-exhausted: park` header on its start (from a client
interceptor), or the namespace default. After its second attempt the run is not failed for good: its
attempt closes as Failed (retry state MAXIMUM_ATTEMPTS_REACHED, as Temporal writes it) and the chain goes
on in a run started paused by `perdura-park`, found by `PerduraParked` and `ExecutionStatus = 'Paused'`.
The caller's `result()` follows the chain and waits. With the failure fixed, an unpause redrives it with
fresh attempts and the caller gets the result."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio import client as temporal_client
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, RetryState
from temporalio.api.enums.v1 import WorkflowExecutionStatus as RawStatus
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    DescribeWorkflowExecutionResponse,
    ListWorkflowExecutionsRequest,
    UnpauseWorkflowExecutionRequest,
)
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.converter import default as default_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from tests.e2e.park_workflows import HEADER, LedgerWorkflow, fixed, run_attempts

RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=100), backoff_coefficient=1, maximum_attempts=2)


class _ParkStarts(temporal_client.OutboundInterceptor):
    async def start_workflow(self, input: temporal_client.StartWorkflowInput):
        park = default_converter().payload_converter.to_payload("park")
        input.headers = {**input.headers, HEADER: park}
        return await super().start_workflow(input)


class ParkRuns(temporal_client.Interceptor):
    """Puts `perdura-on-retries-exhausted: park` on every workflow this client starts."""

    def intercept_client(
        self, next: temporal_client.OutboundInterceptor
    ) -> temporal_client.OutboundInterceptor:
        return _ParkStarts(next)


# Raw RPCs: the SDK's list and describe cannot convert a paused run's status (PAUSED, new in Server 1.32).
async def _listed(client: Client, query: str) -> set[str]:
    answer = await client.workflow_service.list_workflow_executions(
        ListWorkflowExecutionsRequest(namespace=client.namespace, query=query)
    )
    return {info.execution.workflow_id for info in answer.executions}


async def _describe(client: Client, workflow_id: str, run_id: str = "") -> DescribeWorkflowExecutionResponse:
    return await client.workflow_service.describe_workflow_execution(
        DescribeWorkflowExecutionRequest(
            namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id)
        )
    )


async def _parked_run(client: Client, workflow_id: str, timeout: float = 30) -> str:
    """The id of the run the chain was parked in, once it is."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        info = (await _describe(client, workflow_id)).workflow_execution_info
        if info.status == RawStatus.WORKFLOW_EXECUTION_STATUS_PAUSED:
            return info.execution.run_id
        assert asyncio.get_running_loop().time() < deadline, f"not parked: {RawStatus.Name(info.status)}"
        await asyncio.sleep(0.2)


async def _assert_parked(client: Client, workflow_id: str, run_id: str) -> None:
    assert run_attempts[workflow_id] == [1, 2]
    parked = client.get_workflow_handle(workflow_id, run_id=run_id)
    described = await _describe(client, workflow_id, run_id)
    info = described.workflow_execution_info
    assert info.first_run_id != run_id  # the chain's third run
    pause = described.workflow_extended_info.pause_info
    assert pause.identity == "perdura-park"
    assert pause.reason.startswith("parked after 2 attempts, retries exhausted (last failure: ledger closed)")
    assert pause.reason.endswith("redrive with an unpause")
    # The failed attempt is in its run's history as Temporal writes a final failure, with the chain's next run.
    runs = [info.first_run_id]
    while True:
        close = [
            e async for e in client.get_workflow_handle(workflow_id, run_id=runs[-1]).fetch_history_events()
        ][-1]
        if close.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
            break
        attrs = close.workflow_execution_failed_event_attributes
        runs.append(attrs.new_execution_run_id)
        if attrs.new_execution_run_id == run_id:
            assert attrs.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
            assert attrs.failure.message == "ledger closed"
            break
        assert attrs.retry_state == RetryState.RETRY_STATE_IN_PROGRESS
    assert runs[-1] == run_id
    assert len(runs) == 3
    history = [e.event_type async for e in parked.fetch_history_events()]
    assert history[0] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_PAUSED in history
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED not in history  # nothing ran in it yet


async def _chain(client: Client, workflow_id: str) -> list[str]:
    """The run ids of the workflow id's chain, first to current."""
    info = (await _describe(client, workflow_id)).workflow_execution_info
    runs = [info.first_run_id]
    while runs[-1] != info.execution.run_id:
        close = [
            e async for e in client.get_workflow_handle(workflow_id, run_id=runs[-1]).fetch_history_events()
        ][-1]
        runs.append(close.workflow_execution_failed_event_attributes.new_execution_run_id)
    return runs


async def _redrive(client: Client, workflow_id: str, run_id: str) -> None:
    fixed.add(workflow_id)
    await client.workflow_service.unpause_workflow_execution(
        UnpauseWorkflowExecutionRequest(
            namespace=client.namespace, workflow_id=workflow_id, run_id=run_id, identity="ops", reason="fixed"
        )
    )


async def test_a_run_whose_retries_are_exhausted_is_parked_found_and_redriven(client):
    parking = Client(**{**client.config(), "interceptors": [ParkRuns()]})
    task_queue = f"park-runs-{uuid.uuid4().hex[:10]}"
    workflow_id = f"ledger-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[LedgerWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await parking.start_workflow(
            LedgerWorkflow.run, id=workflow_id, task_queue=task_queue, retry_policy=RETRIES
        )
        result = asyncio.ensure_future(handle.result())
        run_id = await _parked_run(client, workflow_id)
        await _assert_parked(client, workflow_id, run_id)
        assert await _listed(client, f"PerduraParked = 'LedgerWorkflow' AND TaskQueue = '{task_queue}'") == {
            workflow_id
        }
        assert await _listed(client, f"ExecutionStatus = 'Paused' AND TaskQueue = '{task_queue}'") == {
            workflow_id
        }
        await asyncio.sleep(1.5)
        assert not result.done()  # the caller waits for the redrive, not for a failure

        await _redrive(client, workflow_id, run_id)
        assert await asyncio.wait_for(result, 30) == "posted on attempt 1"
        assert run_attempts[workflow_id] == [1, 2, 1]
    assert await _listed(client, f"PerduraParked IS NOT NULL AND TaskQueue = '{task_queue}'") == set()


async def test_without_park_a_run_whose_retries_are_exhausted_fails_as_in_temporal(client):
    task_queue = f"park-runs-{uuid.uuid4().hex[:10]}"
    workflow_id = f"ledger-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[LedgerWorkflow], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(
            LedgerWorkflow.run, id=workflow_id, task_queue=task_queue, retry_policy=RETRIES
        )
        with pytest.raises(temporal_client.WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
    assert failed.value.cause.message == "ledger closed"
    (_first, last) = await _chain(client, workflow_id)
    close = [e async for e in client.get_workflow_handle(workflow_id, run_id=last).fetch_history_events()][-1]
    assert (
        close.workflow_execution_failed_event_attributes.retry_state
        == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED
    )
    assert not close.workflow_execution_failed_event_attributes.new_execution_run_id
    assert run_attempts[workflow_id] == [1, 2]


async def test_the_namespace_default_parks_runs_too(server):
    namespace = f"park-runs-{uuid.uuid4().hex[:8]}"
    server.cli("namespace", "create", namespace)
    server.cli("namespace", "update", namespace, "--on-retries-exhausted", "park")
    client = await Client.connect(server.address, namespace=namespace)
    task_queue = f"park-runs-{uuid.uuid4().hex[:10]}"
    workflow_id = f"ledger-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[LedgerWorkflow], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(
            LedgerWorkflow.run, id=workflow_id, task_queue=task_queue, retry_policy=RETRIES
        )
        run_id = await _parked_run(client, workflow_id)
        await _assert_parked(client, workflow_id, run_id)
        await _redrive(client, workflow_id, run_id)
        assert await asyncio.wait_for(handle.result(), 30) == "posted on attempt 1"
