"""Controlling a run from outside: request cancellation, terminate, reset, delete."""

from __future__ import annotations

import grpc
from temporalio.api.enums.v1 import ResetReapplyType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api.rpc import resolve
from engine.errors import InvalidArgument
from engine.services import reset, workflows


async def request_cancel_workflow_execution(
    request: rr.RequestCancelWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.RequestCancelWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    await dbthreads.run(
        workflows.workflow_request_cancel,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
        identity=request.identity,
        reason=request.reason,
        first_execution_run_id=request.first_execution_run_id,
    )
    return rr.RequestCancelWorkflowExecutionResponse()


async def terminate_workflow_execution(
    request: rr.TerminateWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.TerminateWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    if request.HasField("details"):
        validation.blob_size(request.details, "details")
    await dbthreads.run(
        workflows.workflow_terminate,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
        reason=request.reason,
        details=request.details if request.HasField("details") else None,
        identity=request.identity,
        first_execution_run_id=request.first_execution_run_id,
    )
    return rr.TerminateWorkflowExecutionResponse()


async def reset_workflow_execution(
    request: rr.ResetWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.ResetWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    if not request.request_id:
        raise InvalidArgument("RequestId is not set on request.")
    if len(request.request_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("RequestId length exceeds limit.")
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    if request.reset_reapply_type not in ResetReapplyType.values():
        raise InvalidArgument(f"unknown reset reapply type: {request.reset_reapply_type}")
    run_id = await dbthreads.run(reset.workflow_reset, namespace=namespace, request=request)
    return rr.ResetWorkflowExecutionResponse(run_id=run_id)


async def delete_workflow_execution(
    request: rr.DeleteWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    await dbthreads.run(
        workflows.workflow_delete,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
    )
    return rr.DeleteWorkflowExecutionResponse()
