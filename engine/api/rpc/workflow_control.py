"""Controlling a run from outside: request cancellation, terminate, reset, delete, pause, unpause, options."""

from __future__ import annotations

import grpc
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.enums.v1 import ResetReapplyType
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api.rpc import resolve
from engine.errors import InvalidArgument
from engine.services import reset, run_pause, workflows


async def request_cancel_workflow_execution(
    request: rr.RequestCancelWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.RequestCancelWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
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
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
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
    run_id = await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
        reset.workflow_reset,
        namespace=namespace,
        request=request,
    )
    return rr.ResetWorkflowExecutionResponse(run_id=run_id)


async def delete_workflow_execution(
    request: rr.DeleteWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DeleteWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
        workflows.workflow_delete,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
    )
    return rr.DeleteWorkflowExecutionResponse()


def _pause_fields(request: rr.PauseWorkflowExecutionRequest | rr.UnpauseWorkflowExecutionRequest) -> None:
    """Temporal's checks and messages for both (each field at most MaxIDLengthLimit long)."""
    validation.require_id(request.workflow_id, "WorkflowId")
    validation.run_id(request.run_id)
    for value, name in (
        (request.reason, "reason"),
        (request.request_id, "request id"),
        (request.identity, "identity"),
    ):
        if len(value) > validation.MAX_ID_LENGTH:
            raise InvalidArgument(f"{name} is too long.")


async def pause_workflow_execution(
    request: rr.PauseWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.PauseWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _pause_fields(request)
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_id),
        run_pause.workflow_pause,
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=request.run_id,
        identity=request.identity,
        reason=request.reason,
        request_id=request.request_id,
    )
    return rr.PauseWorkflowExecutionResponse()


async def unpause_workflow_execution(
    request: rr.UnpauseWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.UnpauseWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    _pause_fields(request)
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_id),
        run_pause.workflow_unpause,
        namespace=namespace,
        workflow_id=request.workflow_id,
        run_id=request.run_id,
        identity=request.identity,
        reason=request.reason,
        request_id=request.request_id,
    )
    return rr.UnpauseWorkflowExecutionResponse()


async def update_workflow_execution_options(
    request: rr.UpdateWorkflowExecutionOptionsRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateWorkflowExecutionOptionsResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    # Temporal's checks, in its order and with its messages.
    if not request.HasField("update_mask"):
        raise InvalidArgument("UpdateMask is required")
    if not request.HasField("workflow_execution_options"):
        raise InvalidArgument("WorkflowExecutionOptions is required")
    options = request.workflow_execution_options
    for path in request.update_mask.paths:
        if not FieldMask(paths=[path]).IsValidForDescriptor(options.DESCRIPTOR):
            raise InvalidArgument(
                f'error parsing UpdateMask: proto: invalid path "{path}" for message '
                f'"{options.DESCRIPTOR.full_name}"'
            )
    validation.priority(options.priority)
    if options.HasField("versioning_override") and not options.versioning_override.ByteSize():
        raise InvalidArgument("override behavior is required")
    merged = await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
        run_pause.workflow_update_options,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
        options=options,
        paths=list(request.update_mask.paths),
        identity=request.identity,
    )
    return rr.UpdateWorkflowExecutionOptionsResponse(workflow_execution_options=merged)
