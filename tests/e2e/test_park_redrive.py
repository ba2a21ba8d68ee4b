"""Park-and-redrive through the official SDK and the `temporal` CLI: an always-failing activity with
maximum_attempts=3 and park on (a `perdura-on-retries-exhausted: park` header from a workflow
interceptor, or the namespace default) is parked after its third attempt: the run stays running, the
activity shows as paused by `perdura-park`, and `PerduraParked` finds it. With the failure fixed, a
redrive (`temporal activity reset`, one run; `temporal activity reset --query`, a batch) gives it fresh
attempts and the workflow completes."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.batch.v1 import BatchOperationUnpauseActivities
from temporalio.api.enums.v1 import BatchOperationType, EventType, PendingActivityState
from temporalio.api.workflowservice.v1 import StartBatchOperationRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from tests.e2e.park_workflows import (
    ChargeWorkflow,
    ParkOnExhausted,
    ShipWorkflow,
    attempts,
    fixed,
    flaky_charge,
    flaky_ship,
)
from tests.support.batches import job_id_of, temporal, wait_closed

PARKED = SearchAttributeKey.for_keyword_list("PerduraParked")


async def _listed(client: Client, query: str) -> set[str]:
    return {w.id async for w in client.list_workflows(query)}


async def _until_parked(client: Client, query: str, ids: list[str], timeout: float = 30) -> None:
    """Wait until `query` lists exactly `ids` (each activity parked after its third attempt)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while (found := await _listed(client, query)) != set(ids):
        assert asyncio.get_running_loop().time() < deadline, f"listed {found}, want {ids}"
        await asyncio.sleep(0.2)


async def _assert_parked(client: Client, workflow_id: str) -> None:
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING
    (pending,) = described.raw_description.pending_activities
    assert pending.activity_type.name == "flaky_charge"
    assert pending.paused
    assert pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
    assert pending.attempt == 4  # the next attempt, undispatched until a redrive
    assert pending.last_failure.message == "card declined"
    assert pending.pause_info.manual.identity == "perdura-park"
    assert pending.pause_info.manual.reason.startswith("parked after 3 attempts, retries exhausted")
    assert attempts[workflow_id] == [1, 2, 3]
    # No event was written for the attempts or the parking: the history stops at the activity's schedule.
    history = [e.event_type async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]
    assert history[-1] == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


async def _completed_after_redrive(client: Client, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    assert await asyncio.wait_for(handle.result(), 30) == "charged on attempt 1"
    assert attempts[workflow_id] == [1, 2, 3, 1]
    started = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert started == [1]


async def test_a_parked_activity_is_found_and_redriven_one_by_one(client, server):
    task_queue = f"park-{uuid.uuid4().hex[:10]}"
    workflow_id = f"park-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[ChargeWorkflow],
        activities=[flaky_charge],
        interceptors=[ParkOnExhausted()],
    ):
        await client.start_workflow(ChargeWorkflow.run, id=workflow_id, task_queue=task_queue)
        await _until_parked(
            client, f"PerduraParked = 'flaky_charge' AND TaskQueue = '{task_queue}'", [workflow_id]
        )
        assert await _listed(client, f"PerduraParked IS NOT NULL AND WorkflowId = '{workflow_id}'") == {
            workflow_id
        }
        assert await _listed(
            client,
            f"TemporalPauseInfo = 'property:activityType=flaky_charge' AND WorkflowId = '{workflow_id}'",
        ) == {workflow_id}
        await _assert_parked(client, workflow_id)
        # Parked stays parked: no attempt is dispatched and no timeout fires on its own.
        await asyncio.sleep(1)
        assert attempts[workflow_id] == [1, 2, 3]

        fixed.add(workflow_id)
        await temporal(
            "activity", "reset", "--workflow-id", workflow_id, "--activity-id", "1", address=server.address
        )
        await _completed_after_redrive(client, workflow_id)
    assert await _listed(client, f"PerduraParked IS NOT NULL AND WorkflowId = '{workflow_id}'") == set()


async def test_the_namespace_default_parks_and_a_batch_redrives_by_query(server):
    namespace = f"park-{uuid.uuid4().hex[:8]}"
    server.cli("namespace", "create", namespace)
    out = server.cli("namespace", "update", namespace, "--on-retries-exhausted", "park")
    assert "activities whose retries are exhausted park" in out
    described = server.cli("namespace", "describe", namespace).splitlines()
    assert "exhausted: park (activities whose retries are exhausted)" in [
        " ".join(line.split()) for line in described
    ]
    client = await Client.connect(server.address, namespace=namespace)
    task_queue = f"park-{uuid.uuid4().hex[:10]}"
    ids = [f"park-bulk-{uuid.uuid4().hex[:8]}-{i}" for i in range(3)]
    async with Worker(client, task_queue=task_queue, workflows=[ChargeWorkflow], activities=[flaky_charge]):
        for workflow_id in ids:
            await client.start_workflow(ChargeWorkflow.run, id=workflow_id, task_queue=task_queue)
        query = f"PerduraParked IS NOT NULL AND TaskQueue = '{task_queue}'"
        await _until_parked(client, query, ids)
        for workflow_id in ids:
            await _assert_parked(client, workflow_id)

        fixed.update(ids)
        done = await temporal(
            "activity", "reset", "--query", query, "--yes", address=server.address, namespace=namespace
        )
        batch = await wait_closed(client, job_id_of(done.stdout))
        assert (batch.total_operation_count, batch.complete_operation_count) == (3, 3)
        for workflow_id in ids:
            await _completed_after_redrive(client, workflow_id)
    assert await _listed(client, query) == set()


async def test_a_client_cannot_claim_a_run_is_parked(client):
    with pytest.raises(RPCError) as caught:
        await client.start_workflow(
            ChargeWorkflow.run,
            id=f"park-forged-{uuid.uuid4().hex[:8]}",
            task_queue="nobody",
            search_attributes=TypedSearchAttributes([SearchAttributePair(PARKED, ["flaky_charge"])]),
        )
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert (
        caught.value.message == "PerduraParked is set by Perdura when an activity is parked and can't be set"
    )


async def test_an_unpause_batch_with_reset_attempts_redrives_by_type(client):
    """StartBatchOperation with unpause-activities (by type, reset_attempts) through the SDK's service
    client: the parked activities of the runs the query lists get fresh attempts; a run of the query whose
    activity is not of that type is left parked (and counts as done)."""
    task_queue = f"park-{uuid.uuid4().hex[:10]}"
    ids = [f"park-unpause-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    other = f"park-other-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[ChargeWorkflow, ShipWorkflow],
        activities=[flaky_charge, flaky_ship],
        interceptors=[ParkOnExhausted()],
    ):
        for workflow_id in ids:
            await client.start_workflow(ChargeWorkflow.run, id=workflow_id, task_queue=task_queue)
        await client.start_workflow(ShipWorkflow.run, id=other, task_queue=task_queue)
        query = f"PerduraParked IS NOT NULL AND TaskQueue = '{task_queue}'"
        await _until_parked(client, query, [*ids, other])
        fixed.update([*ids, other])
        job_id = f"redrive-{uuid.uuid4().hex[:8]}"
        await client.workflow_service.start_batch_operation(
            StartBatchOperationRequest(
                namespace=client.namespace,
                job_id=job_id,
                reason="card processor fixed",
                visibility_query=query,
                unpause_activities_operation=BatchOperationUnpauseActivities(
                    identity="ops", type="flaky_charge", reset_attempts=True
                ),
            )
        )
        batch = await wait_closed(client, job_id)
        assert (batch.total_operation_count, batch.complete_operation_count) == (3, 3)
        assert batch.operation_type == BatchOperationType.BATCH_OPERATION_TYPE_UNPAUSE_ACTIVITY
        for workflow_id in ids:
            await _completed_after_redrive(client, workflow_id)
        assert await _listed(client, query) == {other}
        await client.get_workflow_handle(other).terminate("not redriven")
