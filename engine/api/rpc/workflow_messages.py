"""Messages to a running workflow: signals, queries (answered by a worker, never written to history) and
updates."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import grpc
from temporalio.api.enums.v1 import QueryResultType, WorkflowExecutionStatus
from temporalio.api.errordetails.v1 import QueryFailedFailure
from temporalio.api.query.v1 import QueryRejected
from temporalio.api.update.v1 import WaitPolicy
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, notify, validation
from engine.api import convert
from engine.api.rpc import resolve, waits
from engine.errors import DeadlineExceeded, InvalidArgument
from engine.history import updates as update_rules
from engine.services import updates as update_services
from engine.services import workflow_queries as queries
from engine.services import workflows
from tenants.models import Namespace

QUERY_WAIT_SECONDS = 20.0
UPDATE_WAIT_SECONDS = 20.0
STICKY_QUERY_SECONDS = 5.0
"""A query left unclaimed on a sticky queue this long moves to the normal queue."""


async def signal_workflow_execution(
    request: rr.SignalWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.SignalWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    if not request.signal_name:
        raise InvalidArgument("SignalName is not set on request.")
    validation.signal_name(request.signal_name)
    if request.HasField("input"):
        validation.blob_size(request.input, "signal input")
    await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
        workflows.workflow_signal,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
        signal_name=request.signal_name,
        input=request.input if request.HasField("input") else None,
        identity=request.identity,
        request_id=request.request_id,
        header=request.header if request.HasField("header") else None,
    )
    return rr.SignalWorkflowExecutionResponse()


# --- queries ----------------------------------------------------------------------------------------


async def query_workflow(
    request: rr.QueryWorkflowRequest, context: grpc.aio.ServicerContext
) -> rr.QueryWorkflowResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    if not request.query.query_type:
        raise InvalidArgument("QueryType is not set on request.")
    if request.query.HasField("query_args"):
        validation.blob_size(request.query.query_args, "query args")
    deadline = waits.deadline(context, QUERY_WAIT_SECONDS)
    # Held for a workflow task in flight (answered with it, so it sees what that task produces), or
    # sent to a worker as a query task at once.
    submitted = await dbthreads.run_in_turn(
        (namespace.id, request.execution.workflow_id),
        queries.query_submit,
        namespace=namespace,
        workflow_id=request.execution.workflow_id,
        run_id=request.execution.run_id,
        query=request.query,
        reject_condition=request.query_reject_condition,
        wait=timedelta(seconds=max(deadline - asyncio.get_running_loop().time(), 0.0)),
    )
    if isinstance(submitted, queries.Rejected):
        return rr.QueryWorkflowResponse(
            query_rejected=QueryRejected(status=WorkflowExecutionStatus.ValueType(submitted.status))
        )
    try:
        answer = await _wait_for_answer(submitted.query_id, namespace, deadline, submitted.task_queue)
    finally:
        await dbthreads.run(queries.query_finish, submitted.query_id)
    if answer is None:
        raise DeadlineExceeded(
            f"query timed out: no worker answered it on task queue {submitted.task_queue!r}; "
            "check that a worker for this workflow is running"
        )
    if answer.completed_type == QueryResultType.QUERY_RESULT_TYPE_FAILED:
        raise InvalidArgument(
            answer.error_message or answer.failure.message,
            QueryFailedFailure(failure=answer.failure)
            if answer.HasField("failure")
            else QueryFailedFailure(),
        )
    return rr.QueryWorkflowResponse(
        query_result=answer.query_result if answer.HasField("query_result") else None
    )


async def _wait_for_answer(
    query_id: int, namespace: Namespace, deadline: float, normal_queue: str
) -> rr.RespondQueryTaskCompletedRequest | None:
    """The worker's answer, or None when the deadline passes.

    A query held for the run's workflow task is answered in its completion; one left unclaimed on the
    sticky queue for STICKY_QUERY_SECONDS moves to the normal queue. Every change is announced on the
    query's key, from whichever process made it.
    """
    loop = asyncio.get_running_loop()
    sticky_since: float | None = None
    with notify.hub.waiter(notify.query_key(query_id)) as waiter:
        while True:
            status = await dbthreads.run(queries.query_status, query_id)
            if status.answer is not None:
                return status.answer
            now = loop.time()
            if now >= deadline:
                return None
            wait = min(deadline - now, waits.RECHECK_SECONDS)
            if status.task_queue and status.task_queue != normal_queue:
                sticky_since = now if sticky_since is None else sticky_since
                if now - sticky_since >= STICKY_QUERY_SECONDS:
                    await dbthreads.run(
                        queries.query_move,
                        query_id,
                        namespace=namespace,
                        from_queue=status.task_queue,
                        task_queue=normal_queue,
                    )
                    continue
                wait = min(wait, sticky_since + STICKY_QUERY_SECONDS - now)
            await waiter.wait(wait)
            waiter.rearm()


async def respond_query_task_completed(
    request: rr.RespondQueryTaskCompletedRequest, context: grpc.aio.ServicerContext
) -> rr.RespondQueryTaskCompletedResponse:
    namespace = await resolve.namespace(request.namespace)
    token = resolve.task_token(namespace, request.task_token)
    if not token.query_id:
        raise InvalidArgument("Task token is not a query task token.")
    if request.HasField("query_result"):
        validation.blob_size(request.query_result, "query result")
    await dbthreads.run(queries.query_answer, namespace=namespace, query_id=token.query_id, answer=request)
    return rr.RespondQueryTaskCompletedResponse()


# --- updates ----------------------------------------------------------------------------------------


def validate_update(request: rr.UpdateWorkflowExecutionRequest) -> None:
    validation.require_id(request.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.workflow_execution.run_id)
    meta = request.request.meta
    if not meta.update_id:
        raise InvalidArgument("UpdateId is not set on request.")
    if len(meta.update_id) > validation.MAX_ID_LENGTH:
        raise InvalidArgument("UpdateId exceeds length limit.")
    if not request.request.input.name:
        raise InvalidArgument("Update name is not set on request.")
    if request.request.input.HasField("args"):
        validation.blob_size(request.request.input.args, "update args")


async def update_workflow_execution(
    request: rr.UpdateWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.UpdateWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validate_update(request)
    status = await dbthreads.run_in_turn(
        (namespace.id, request.workflow_execution.workflow_id),
        update_services.update_admit,
        namespace=namespace,
        workflow_id=request.workflow_execution.workflow_id,
        run_id=request.workflow_execution.run_id,
        request=request.request,
        first_execution_run_id=request.first_execution_run_id,
    )
    return await update_wait(context, namespace, request.request.meta.update_id, status, request.wait_policy)


async def poll_workflow_execution_update(
    request: rr.PollWorkflowExecutionUpdateRequest, context: grpc.aio.ServicerContext
) -> rr.PollWorkflowExecutionUpdateResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.update_ref.workflow_execution.workflow_id, "WorkflowId")
    validation.run_id(request.update_ref.workflow_execution.run_id)
    if not request.update_ref.update_id:
        raise InvalidArgument("UpdateId is not set on request.")
    status = await dbthreads.run(
        update_services.update_status,
        namespace=namespace,
        workflow_id=request.update_ref.workflow_execution.workflow_id,
        run_id=request.update_ref.workflow_execution.run_id,
        update_id=request.update_ref.update_id,
    )
    response = await update_wait(
        context, namespace, request.update_ref.update_id, status, request.wait_policy, default_stage=0
    )
    return rr.PollWorkflowExecutionUpdateResponse(
        outcome=response.outcome if response.HasField("outcome") else None,
        stage=response.stage,
        update_ref=response.update_ref,
    )


async def update_wait(
    context: grpc.aio.ServicerContext,
    namespace: Namespace,
    update_id: str,
    status: update_services.UpdateStatus,
    wait_policy: WaitPolicy,
    default_stage: int = update_rules.COMPLETED,
) -> rr.UpdateWorkflowExecutionResponse:
    """Wait (bounded) until the update reaches the stage asked for; answer with the stage reached."""
    # Unspecified: an update call waits for completion; a poll answers with the stage reached so far.
    wanted = wait_policy.lifecycle_stage or default_stage
    loop = asyncio.get_running_loop()
    deadline = waits.deadline(context, UPDATE_WAIT_SECONDS)
    with notify.hub.waiter(notify.run_key(status.execution.pk)) as waiter:
        armed = False  # the first re-read comes right after arming: a change before it woke no one
        while status.stage < wanted:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if armed:
                await waiter.wait(min(remaining, waits.RECHECK_SECONDS))
                waiter.rearm()
            armed = True
            status = await dbthreads.run(
                update_services.update_status,
                namespace=namespace,
                workflow_id=status.execution.workflow_id,
                run_id=status.run_id,
                update_id=update_id,
                waiting=True,
            )
    return convert.update_response(status, update_id)
