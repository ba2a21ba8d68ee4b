"""Starting runs: StartWorkflowExecution, SignalWithStartWorkflowExecution and ExecuteMultiOperation
(update-with-start)."""

from __future__ import annotations

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api import convert
from engine.api.rpc import resolve, waits, workflow_messages, workflow_tasks
from engine.api.rpc.visibility import check_search_attributes
from engine.errors import EngineError, InvalidArgument
from engine.history.mutation import TaskKind
from engine.services import with_start, workflows


async def start_workflow_execution(
    request: rr.StartWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.StartWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    workflows.require_accepting_starts(namespace=namespace)
    validation.start_request(request)
    await check_search_attributes(namespace, request.search_attributes)
    result = await dbthreads.run_in_turn(
        (namespace.id, request.workflow_id), workflows.workflow_start, namespace=namespace, request=request
    )
    response = rr.StartWorkflowExecutionResponse(run_id=result.run_id, started=result.started)
    if result.eager_workflow_task is not None:
        waits.matched_eagerly(namespace, TaskKind.WORKFLOW)
        response.eager_workflow_task.CopyFrom(
            await workflow_tasks.workflow_task_response(namespace, result.eager_workflow_task)
        )
    return response


async def signal_with_start_workflow_execution(
    request: rr.SignalWithStartWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.SignalWithStartWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    workflows.require_accepting_starts(namespace=namespace)
    start = convert.start_of_signal_with_start(request)
    validation.start_request(start)
    await check_search_attributes(namespace, start.search_attributes)
    if not request.signal_name:
        raise InvalidArgument("SignalName is not set on request.")
    validation.signal_name(request.signal_name, with_start=True)
    if request.HasField("signal_input"):
        validation.blob_size(request.signal_input, "signal input")
    result = await dbthreads.run_in_turn(
        (namespace.id, start.workflow_id),
        with_start.workflow_signal_with_start,
        namespace=namespace,
        start=start,
        signal_name=request.signal_name,
        input=request.signal_input if request.HasField("signal_input") else None,
        header=request.header if request.HasField("header") else None,
    )
    return rr.SignalWithStartWorkflowExecutionResponse(run_id=result.run_id, started=result.started)


async def execute_multi_operation(
    request: rr.ExecuteMultiOperationRequest, context: grpc.aio.ServicerContext
) -> rr.ExecuteMultiOperationResponse:
    """Update-with-start: a StartWorkflow then an UpdateWorkflow operation. A failure answers with one
    status per operation, the other aborted (convert.multi_operation_error)."""
    namespace = await resolve.namespace(request.namespace)
    ops = request.operations
    if len(ops) != 2 or not ops[0].HasField("start_workflow") or not ops[1].HasField("update_workflow"):
        raise InvalidArgument(
            "ExecuteMultiOperation takes exactly a StartWorkflow then an UpdateWorkflow operation."
        )
    start, update = ops[0].start_workflow, ops[1].update_workflow
    try:
        # Temporal lets update-with-start into a deprecated namespace (and so starts a run there);
        # a deprecated namespace takes no new run from any call here.
        workflows.require_accepting_starts(namespace=namespace)
    except EngineError as e:
        raise convert.multi_operation_error(e, failed=0) from None
    # The handler acts on the request's namespace only: an operation naming another is refused, as
    # Temporal refuses it (the interceptor has already refused it to a key whose namespaces differ).
    for index, op_namespace in enumerate((start.namespace, update.namespace)):
        if op_namespace and op_namespace != request.namespace:
            raise convert.multi_operation_error(
                InvalidArgument("Operation namespace did not match request's namespace."), failed=index
            )
    try:
        validation.start_request(start)
        await check_search_attributes(namespace, start.search_attributes)
        workflow_messages.validate_update(update)
        with_start.update_with_start_check(start=start, update=update)
    except EngineError as e:
        raise convert.multi_operation_error(e, failed=0) from None
    try:
        outcome = await dbthreads.run_in_turn(
            (namespace.id, start.workflow_id),
            with_start.workflow_update_with_start,
            namespace=namespace,
            start=start,
            update=update.request,
        )
    except with_start.OperationFailed as e:
        raise convert.multi_operation_error(e.error, failed=e.index) from None
    update_id = update.request.meta.update_id
    try:
        update_response = await workflow_messages.update_wait(
            context, namespace, update_id, outcome.status, update.wait_policy
        )
    except EngineError as e:
        if outcome.attached:
            raise  # nothing was started: the error is the update's own
        raise convert.multi_operation_error(e, failed=1) from None
    return rr.ExecuteMultiOperationResponse(
        responses=[
            rr.ExecuteMultiOperationResponse.Response(
                start_workflow=rr.StartWorkflowExecutionResponse(
                    run_id=outcome.run_id, started=outcome.started
                )
            ),
            rr.ExecuteMultiOperationResponse.Response(update_workflow=update_response),
        ]
    )
