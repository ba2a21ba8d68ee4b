"""Activity tasks for workers: poll, heartbeat, and report the outcome.

Outcomes arrive by task token (from the worker) or by ids (async completion from elsewhere); both resolve
to a token and share one handler per outcome.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, tokens, validation
from engine.api import convert
from engine.api.rpc import deployments, resolve, task_queues, waits
from engine.errors import InvalidArgument
from engine.history.activity import HeartbeatAnswer
from engine.history.mutation import TaskKind
from engine.services import activity_tasks
from tenants.models import Namespace
from visibility.divisions import activity_host_id


async def poll_activity_task_queue(
    request: rr.PollActivityTaskQueueRequest, context: grpc.aio.ServicerContext
) -> rr.PollActivityTaskQueueResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_task_queue(request.task_queue.name)
    task_queues.poller_seen(namespace, task_queues.ACTIVITY, request)
    await deployments.poll_seen(namespace, request)
    request_id = str(uuid.uuid4())
    version = deployments.poller_version(request)
    started = await waits.long_poll(
        context,
        namespace,
        TaskKind.ACTIVITY,
        request.task_queue.name,
        lambda: activity_tasks.poll_once(
            namespace=namespace,
            task_queue=request.task_queue.name,
            identity=request.identity,
            request_id=request_id,
            build_id=request.worker_version_capabilities.build_id,
            version=version,
        ),
        group=deployments.waiter_group(version),
        offer=activity_tasks.starter(
            identity=request.identity,
            request_id=request_id,
            build_id=request.worker_version_capabilities.build_id,
        ),
    )
    if started is None:
        return rr.PollActivityTaskQueueResponse()
    return convert.activity_task_response(namespace, started)


async def _by_token(request: Any) -> tuple[Namespace, tokens.TaskToken]:
    namespace = await resolve.namespace(request.namespace)
    return namespace, resolve.task_token(namespace, request.task_token)


async def _by_id(request: Any) -> tuple[Namespace, tokens.TaskToken]:
    """The token of the attempt a request names by ids: a workflow's activity, or without a workflow id a
    standalone activity (its run id is the activity's)."""
    namespace = await resolve.namespace(request.namespace)
    validation.run_id(request.run_id)
    validation.require_id(request.activity_id, "ActivityId")
    if request.workflow_id:
        validation.require_id(request.workflow_id, "WorkflowId")
        workflow_id = request.workflow_id
    else:
        workflow_id = activity_host_id(request.activity_id)
    token = await dbthreads.run(
        activity_tasks.token_for,
        namespace=namespace,
        workflow_id=workflow_id,
        run_id=request.run_id,
        activity_id=request.activity_id,
    )
    return namespace, token


# --- heartbeats -------------------------------------------------------------------------------------


async def _heartbeat(namespace: Namespace, token: tokens.TaskToken, request: Any) -> HeartbeatAnswer:
    if request.HasField("details"):
        validation.blob_size(request.details, "heartbeat details")
    return await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        activity_tasks.activity_heartbeat,
        namespace=namespace,
        token=token,
        details=request.details if request.HasField("details") else None,
    )


async def record_activity_task_heartbeat(
    request: rr.RecordActivityTaskHeartbeatRequest, context: grpc.aio.ServicerContext
) -> rr.RecordActivityTaskHeartbeatResponse:
    answer = await _heartbeat(*await _by_token(request), request)
    return rr.RecordActivityTaskHeartbeatResponse(
        cancel_requested=answer.cancel_requested, activity_paused=answer.paused, activity_reset=answer.reset
    )


async def record_activity_task_heartbeat_by_id(
    request: rr.RecordActivityTaskHeartbeatByIdRequest, context: grpc.aio.ServicerContext
) -> rr.RecordActivityTaskHeartbeatByIdResponse:
    answer = await _heartbeat(*await _by_id(request), request)
    return rr.RecordActivityTaskHeartbeatByIdResponse(
        cancel_requested=answer.cancel_requested, activity_paused=answer.paused, activity_reset=answer.reset
    )


# --- outcomes ---------------------------------------------------------------------------------------


async def _completed(namespace: Namespace, token: tokens.TaskToken, request: Any) -> None:
    if request.HasField("result"):
        validation.blob_size(request.result, "result")
    await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        activity_tasks.activity_complete,
        namespace=namespace,
        token=token,
        result=request.result if request.HasField("result") else None,
        identity=request.identity,
    )


async def _failed(namespace: Namespace, token: tokens.TaskToken, request: Any) -> None:
    if not request.HasField("failure"):
        raise InvalidArgument("Failure is not set on request.")
    validation.blob_size(request.failure, "failure")
    await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        activity_tasks.activity_fail,
        namespace=namespace,
        token=token,
        failure=request.failure,
        identity=request.identity,
        last_heartbeat_details=request.last_heartbeat_details
        if request.HasField("last_heartbeat_details")
        else None,
    )


async def _canceled(namespace: Namespace, token: tokens.TaskToken, request: Any) -> None:
    await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        activity_tasks.activity_canceled,
        namespace=namespace,
        token=token,
        details=request.details if request.HasField("details") else None,
        identity=request.identity,
    )


async def respond_activity_task_completed(
    request: rr.RespondActivityTaskCompletedRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskCompletedResponse:
    await _completed(*await _by_token(request), request)
    return rr.RespondActivityTaskCompletedResponse()


async def respond_activity_task_completed_by_id(
    request: rr.RespondActivityTaskCompletedByIdRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskCompletedByIdResponse:
    await _completed(*await _by_id(request), request)
    return rr.RespondActivityTaskCompletedByIdResponse()


async def respond_activity_task_failed(
    request: rr.RespondActivityTaskFailedRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskFailedResponse:
    await _failed(*await _by_token(request), request)
    return rr.RespondActivityTaskFailedResponse()


async def respond_activity_task_failed_by_id(
    request: rr.RespondActivityTaskFailedByIdRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskFailedByIdResponse:
    await _failed(*await _by_id(request), request)
    return rr.RespondActivityTaskFailedByIdResponse()


async def respond_activity_task_canceled(
    request: rr.RespondActivityTaskCanceledRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskCanceledResponse:
    await _canceled(*await _by_token(request), request)
    return rr.RespondActivityTaskCanceledResponse()


async def respond_activity_task_canceled_by_id(
    request: rr.RespondActivityTaskCanceledByIdRequest, context: grpc.aio.ServicerContext
) -> rr.RespondActivityTaskCanceledByIdResponse:
    await _canceled(*await _by_id(request), request)
    return rr.RespondActivityTaskCanceledByIdResponse()
