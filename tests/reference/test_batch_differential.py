"""Differential batch operations test: the same batches on the real Temporal dev server and on
`perdura dev`, the same answers: Temporal's checks and messages, what Describe and List report, what a terminated run's
history says, stopping a closed batch and reusing its job id, and a `temporal workflow terminate --query`
batch as `temporal batch describe` shows it.

Not compared: pacing and the concurrent-batch refusal. The real dev server counts running batches
through its visibility, indexed asynchronously, and lets a small batch run ahead of its
max_operations_per_second (four batches of ten runs at 1/s each closed within two seconds), so neither
shows reliably there; tests/e2e/test_batch_operations.py checks Perdura's refusal carries the status,
message and ResourceExhaustedFailure the real server gave when it did refuse.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.batch.v1 import (
    BatchOperationSignal,
    BatchOperationTermination,
)
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr
from temporalio.client import Client
from temporalio.service import RPCError

from tests.support.batches import describe_json, idle_runs, job_id_of, temporal, wait_closed

pytestmark = pytest.mark.reference


async def _answer(coro) -> tuple[str, str, bytes]:  # type: ignore[no-untyped-def]
    """(status, message, details) of a refused call; ("OK", "", b"") of an accepted one."""
    try:
        await coro
    except RPCError as e:
        details = b"".join(d.value for d in e.grpc_status.details) if e.grpc_status else b""
        return e.status.name, e.message, details
    return "OK", "", b""


async def _scenario(client: Client) -> dict[str, object]:
    s = client.workflow_service
    ns = client.namespace
    out: dict[str, object] = {}
    _queue, ids = await idle_runs(client, 3, prefix="diff-batch")
    listed = [WorkflowExecution(workflow_id=i) for i in ids]
    # Temporal's checks, in its order.
    out["no job"] = await _answer(
        s.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace=ns, reason="r", executions=listed, termination_operation=BatchOperationTermination()
            )
        )
    )
    out["no reason"] = await _answer(
        s.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace=ns, job_id="x", executions=listed, termination_operation=BatchOperationTermination()
            )
        )
    )
    out["no operation"] = await _answer(
        s.start_batch_operation(
            rr.StartBatchOperationRequest(namespace=ns, job_id="x", reason="r", executions=listed)
        )
    )
    out["both"] = await _answer(
        s.start_batch_operation(
            rr.StartBatchOperationRequest(
                namespace=ns,
                job_id="x",
                reason="r",
                executions=listed,
                visibility_query="WorkflowId = 'a'",
                termination_operation=BatchOperationTermination(),
            )
        )
    )
    out["describe missing"] = await _answer(
        s.describe_batch_operation(rr.DescribeBatchOperationRequest(namespace=ns, job_id="no-such-job"))
    )
    out["stop missing"] = await _answer(
        s.stop_batch_operation(rr.StopBatchOperationRequest(namespace=ns, job_id="no-such-job", reason="r"))
    )
    out["stop no reason"] = await _answer(
        s.stop_batch_operation(rr.StopBatchOperationRequest(namespace=ns, job_id="no-such-job"))
    )
    # A batch that terminates the runs (and names one that does not exist).
    done = f"done-{uuid.uuid4().hex[:8]}"
    await s.start_batch_operation(
        rr.StartBatchOperationRequest(
            namespace=ns,
            job_id=done,
            reason="finish them",
            executions=[*listed, WorkflowExecution(workflow_id="no-such-run")],
            termination_operation=BatchOperationTermination(identity="terminator"),
        )
    )
    described = await wait_closed(client, done)
    out["described"] = (
        described.state,
        described.operation_type,
        described.total_operation_count,
        described.complete_operation_count,
        described.failure_operation_count,
        described.identity,
        described.reason,
        described.query,
        [
            e.business_id.rsplit("-", 1)[-1] for e in described.executions
        ],  # the ids differ by their random part
    )
    out["stop closed"] = await _answer(
        s.stop_batch_operation(rr.StopBatchOperationRequest(namespace=ns, job_id=done, reason="again"))
    )
    history = [e async for e in client.get_workflow_handle(ids[0]).fetch_history_events()]
    out["terminated"] = (
        EventType.Name(history[-1].event_type),
        history[-1].workflow_execution_terminated_event_attributes.reason,
    )
    # The namespace is shared with other tests' batches (on `perdura dev`, tests/e2e's): compare this
    # scenario's own jobs, as one page lists them.
    listed_page = await s.list_batch_operations(rr.ListBatchOperationsRequest(namespace=ns, page_size=1000))
    out["listed"] = [(i.state, i.operation_type) for i in listed_page.operation_info if i.job_id == done]
    out["reuse"] = (
        await _answer(
            s.start_batch_operation(
                rr.StartBatchOperationRequest(
                    namespace=ns,
                    job_id=done,
                    reason="again",
                    executions=listed,
                    signal_operation=BatchOperationSignal(signal="s"),
                )
            )
        )
    )[0]
    # The CLI: a termination by query, as `temporal batch describe -o json` shows it.
    await asyncio.sleep(1)  # the real server's visibility sees the last batch closed
    queue, _more = await idle_runs(client, 2, prefix="diff-cli")
    address = client.service_client.config.target_host
    started = await temporal(
        "workflow",
        "terminate",
        "--query",
        f"TaskQueue = '{queue}'",
        "--reason",
        "cli",
        "--yes",
        address=address,
    )
    job = job_id_of(started.stdout)
    await wait_closed(client, job)
    shown = await describe_json(address, job)
    for varying in ("jobId", "startTime", "closeTime", "query"):
        assert shown.pop(varying), varying
    out["cli describe"] = shown
    return out


async def test_batches_answer_as_temporal_does(both_clients):
    temporal = await _scenario(both_clients["temporal"])
    await asyncio.sleep(1)  # the real server's visibility sees its batch closed before the next test
    perdura = await _scenario(both_clients["perdura"])
    for key in temporal:
        assert perdura[key] == temporal[key], key
