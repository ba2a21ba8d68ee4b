"""Differential tests of paused activities, what parked ones are: the TemporalPauseInfo search attribute
and the reset-activities and unpause-activities batch operations that redrive them in bulk. On the real dev
server (Server 1.32) and on `perdura dev`, pausing an activity alone (the run not paused) adds
`property:activityType=<type>` to the run's TemporalPauseInfo, so `TemporalPauseInfo =
'property:activityType=<type>'` lists the run, and unpausing it takes the entry away. Parked activities
(park-and-redrive, engine/history/parking.py) rely on it being kept as Temporal keeps it."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.api.batch.v1 import BatchOperationResetActivities, BatchOperationUnpauseActivities
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import BatchOperationState, BatchOperationType
from temporalio.api.workflowservice.v1 import (
    PauseActivityRequest,
    StartBatchOperationRequest,
    UnpauseActivityRequest,
)
from temporalio.client import Client
from temporalio.worker import Worker

from tests.e2e.park_workflows import ChargeWorkflow
from tests.support.batches import wait_closed

pytestmark = pytest.mark.reference


async def _count(client: Client, query: str, want: int) -> int:
    """The count of `query`, polled until it is `want` (visibility is eventually consistent there) or 10 s."""
    count = -1
    for _ in range(100):
        count = (await client.count_workflows(query)).count
        if count == want:
            return count
        await asyncio.sleep(0.1)
    return count


async def _pause_info(client: Client, workflow_id: str) -> list[str]:
    described = await client.get_workflow_handle(workflow_id).describe()
    payload = described.raw_description.workflow_execution_info.search_attributes.indexed_fields.get(
        "TemporalPauseInfo"
    )
    return json.loads(payload.data) if payload is not None and payload.data else []


async def _story(client: Client) -> dict[str, object]:
    task_queue = f"pause-info-{uuid.uuid4().hex[:8]}"
    workflow_id = f"pause-info-{uuid.uuid4().hex[:8]}"
    execution = WorkflowExecution(workflow_id=workflow_id)
    query = f"TemporalPauseInfo = 'property:activityType=flaky_charge' AND WorkflowId = '{workflow_id}'"
    # A worker with the workflow only: the activity stays scheduled, no attempt runs.
    async with Worker(client, task_queue=task_queue, workflows=[ChargeWorkflow]):
        handle = await client.start_workflow(ChargeWorkflow.run, id=workflow_id, task_queue=task_queue)
        for _ in range(100):
            if (await handle.describe()).raw_description.pending_activities:
                break
            await asyncio.sleep(0.05)
        before = await _pause_info(client, workflow_id)
        await client.workflow_service.pause_activity(
            PauseActivityRequest(
                namespace=client.namespace, execution=execution, id="1", identity="op", reason="look"
            )
        )
        paused = await _pause_info(client, workflow_id)
        listed_paused = await _count(client, query, 1)
        await client.workflow_service.unpause_activity(
            UnpauseActivityRequest(namespace=client.namespace, execution=execution, id="1", identity="op")
        )
        unpaused = await _pause_info(client, workflow_id)
        listed_unpaused = await _count(client, query, 0)
        await handle.terminate("done")
    return {
        "before": before,
        "paused": paused,
        "listed while paused": listed_paused,
        "unpaused": unpaused,
        "listed after unpause": listed_unpaused,
    }


async def test_a_paused_activity_is_in_temporal_pause_info(both_clients):
    observed = {name: await _story(client) for name, client in both_clients.items()}
    assert observed["temporal"] == {
        "before": [],
        "paused": ["property:activityType=flaky_charge"],
        "listed while paused": 1,
        "unpaused": [],
        "listed after unpause": 0,
    }
    assert observed["perdura"] == observed["temporal"]


async def _batch_story(client: Client, field: str, operation: object) -> dict[str, object]:
    """Two runs with a paused activity each, then one batch over them: what the batch and the runs show."""
    task_queue = f"pause-batch-{uuid.uuid4().hex[:8]}"
    ids = [f"pause-batch-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    query = "WorkflowId IN (" + ", ".join(f"'{i}'" for i in ids) + ")"
    async with Worker(client, task_queue=task_queue, workflows=[ChargeWorkflow]):
        handles = [await client.start_workflow(ChargeWorkflow.run, id=i, task_queue=task_queue) for i in ids]
        for handle in handles:
            for _ in range(100):
                if (await handle.describe()).raw_description.pending_activities:
                    break
                await asyncio.sleep(0.05)
            await client.workflow_service.pause_activity(
                PauseActivityRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=handle.id),
                    id="1",
                    identity="op",
                    reason="look",
                )
            )
        assert await _count(client, query, 2) == 2
        job_id = f"pause-batch-{uuid.uuid4().hex[:8]}"
        await client.workflow_service.start_batch_operation(
            StartBatchOperationRequest(
                namespace=client.namespace,
                job_id=job_id,
                reason="redrive",
                visibility_query=query,
                **{field: operation},
            )
        )
        batch = await wait_closed(client, job_id)
        activities = []
        for handle in handles:
            (pending,) = (await handle.describe()).raw_description.pending_activities
            activities.append((pending.paused, pending.attempt))
            await handle.terminate("done")
    return {
        "type": BatchOperationType.Name(batch.operation_type),
        "state": BatchOperationState.Name(batch.state),
        "counts": (
            batch.total_operation_count,
            batch.complete_operation_count,
            batch.failure_operation_count,
        ),
        "activities": activities,
    }


@pytest.mark.parametrize(
    ("field", "operation", "kind"),
    [
        ("reset_activities_operation", BatchOperationResetActivities(match_all=True), "RESET_ACTIVITY"),
        ("unpause_activities_operation", BatchOperationUnpauseActivities(match_all=True), "UNPAUSE_ACTIVITY"),
    ],
    ids=["reset", "unpause"],
)
async def test_activity_batches_unpause_paused_activities_as_temporal(both_clients, field, operation, kind):
    observed = {name: await _batch_story(client, field, operation) for name, client in both_clients.items()}
    assert observed["temporal"] == {
        "type": f"BATCH_OPERATION_TYPE_{kind}",
        "state": "BATCH_OPERATION_STATE_COMPLETED",
        "counts": (2, 2, 0),
        "activities": [(False, 1), (False, 1)],
    }
    assert observed["perdura"] == observed["temporal"]
