"""Batch operations: start, stop, describe and list (engine/services/batches.py does the work)."""

from __future__ import annotations

from datetime import datetime

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.batch.v1 import BatchOperationInfo
from temporalio.api.common.v1 import Execution
from temporalio.api.enums.v1 import ExecutionType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, page_tokens
from engine.api.rpc import resolve
from engine.models import BatchOperation
from engine.services import batches


def _timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


async def start_batch_operation(
    request: rr.StartBatchOperationRequest, context: grpc.aio.ServicerContext
) -> rr.StartBatchOperationResponse:
    namespace = await resolve.namespace(request.namespace)
    await dbthreads.run(batches.batch_start, namespace=namespace, request=request)
    return rr.StartBatchOperationResponse()


async def stop_batch_operation(
    request: rr.StopBatchOperationRequest, context: grpc.aio.ServicerContext
) -> rr.StopBatchOperationResponse:
    namespace = await resolve.namespace(request.namespace)
    await dbthreads.run(
        batches.batch_stop,
        namespace=namespace,
        job_id=request.job_id,
        reason=request.reason,
        identity=request.identity,
    )
    return rr.StopBatchOperationResponse()


def _describe(row: BatchOperation) -> rr.DescribeBatchOperationResponse:
    listed = batches.batch_listed_targets(batch=row)
    return rr.DescribeBatchOperationResponse(
        operation_type=row.operation_type,  # type: ignore[arg-type]
        job_id=row.job_id,
        state=row.state,  # type: ignore[arg-type]
        start_time=_timestamp(row.start_time),
        close_time=_timestamp(row.close_time),
        total_operation_count=row.total,
        complete_operation_count=row.completed,
        failure_operation_count=row.failed,
        identity=row.identity,
        reason=row.reason,
        query=row.query,
        executions=[
            Execution(type=ExecutionType.EXECUTION_TYPE_WORKFLOW, business_id=t.workflow_id, run_id=t.run_id)
            for t in listed
        ],
    )


async def describe_batch_operation(
    request: rr.DescribeBatchOperationRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeBatchOperationResponse:
    namespace = await resolve.namespace(request.namespace)

    def read() -> rr.DescribeBatchOperationResponse:
        return _describe(batches.batch_get(namespace=namespace, job_id=request.job_id))

    return await dbthreads.run(read)


async def list_batch_operations(
    request: rr.ListBatchOperationsRequest, context: grpc.aio.ServicerContext
) -> rr.ListBatchOperationsResponse:
    namespace = await resolve.namespace(request.namespace)
    after = page_tokens.batches_decode(request.next_page_token) if request.next_page_token else None
    rows, last = await dbthreads.run(
        batches.batch_list, namespace=namespace, page_size=request.page_size, after_pk=after
    )
    return rr.ListBatchOperationsResponse(
        operation_info=[
            BatchOperationInfo(
                job_id=r.job_id,
                state=r.state,  # type: ignore[arg-type]
                start_time=_timestamp(r.start_time),
                close_time=_timestamp(r.close_time),
                operation_type=r.operation_type,  # type: ignore[arg-type]
            )
            for r in rows
        ],
        next_page_token=page_tokens.batches_encode(last) if last is not None else b"",
    )
