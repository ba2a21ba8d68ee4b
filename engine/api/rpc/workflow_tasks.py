"""Workflow tasks for workers: poll (a workflow task or a query task), complete, fail, reset the sticky queue."""

from __future__ import annotations

import uuid

import grpc
from perdura import metrics
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, validation
from engine.api import convert
from engine.api.rpc import deployments, resolve, task_queues, waits
from engine.history.mutation import TaskKind
from engine.models import Execution
from engine.persistence import store
from engine.services import recent_events, workflow_tasks
from engine.services import workflow_queries as queries
from tenants.models import Namespace


async def poll_workflow_task_queue(
    request: rr.PollWorkflowTaskQueueRequest, context: grpc.aio.ServicerContext
) -> rr.PollWorkflowTaskQueueResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_task_queue(request.task_queue.name)
    task_queues.poller_seen(namespace, task_queues.WORKFLOW, request)
    await deployments.poll_seen(namespace, request)
    request_id = str(uuid.uuid4())
    version = deployments.poller_version(request)
    started = await waits.long_poll(
        context,
        namespace,
        TaskKind.WORKFLOW,
        request.task_queue.name,
        lambda: workflow_tasks.poll_once(
            namespace=namespace,
            task_queue=request.task_queue.name,
            identity=request.identity,
            request_id=request_id,
            build_id=request.worker_version_capabilities.build_id,
            version=version,
        ),
        group=deployments.waiter_group(version),
        offer=workflow_tasks.starter(
            identity=request.identity,
            request_id=request_id,
            build_id=request.worker_version_capabilities.build_id,
        ),
    )
    if started is None:
        return rr.PollWorkflowTaskQueueResponse()
    if isinstance(started, queries.StartedQuery):
        return await _query_task_response(namespace, started)
    return await workflow_task_response(namespace, started)


_FROM_CHANGE = metrics.workflow_task_histories.labels("change")
_FROM_MEMORY = metrics.workflow_task_histories.labels("memory")
_FROM_DATABASE = metrics.workflow_task_histories.labels("database")


async def workflow_task_response(
    namespace: Namespace, started: workflow_tasks.StartedWorkflowTask
) -> rr.PollWorkflowTaskQueueResponse:
    """A started workflow task with its history: the events of the change that started it when it made all
    of them, else those this process's recent changes of the run wrote (engine/services/recent_events.py),
    else read after the claim committed."""
    first, last = started.first_event_id, started.last_stored_event_id
    events, source = started.events, _FROM_CHANGE
    if events is None:
        events, source = recent_events.history(started.execution, first, last), _FROM_MEMORY
    if events is None:
        events, source = await _history(started.execution, first, last), _FROM_DATABASE
    source.inc()
    return convert.workflow_task_response(namespace, started, events)


async def _query_task_response(
    namespace: Namespace, started: queries.StartedQuery
) -> rr.PollWorkflowTaskQueueResponse:
    events = await _history(started.execution, started.first_event_id, started.state.next_event_id - 1)
    return convert.query_task_response(namespace, started, events)


async def _history(execution: Execution, first_event_id: int, last_event_id: int) -> list[HistoryEvent]:
    return await dbthreads.run(
        lambda: list(
            store.history_events(execution, first_event_id=first_event_id, last_event_id=last_event_id)
        )
    )


async def respond_workflow_task_completed(
    request: rr.RespondWorkflowTaskCompletedRequest, context: grpc.aio.ServicerContext
) -> rr.RespondWorkflowTaskCompletedResponse:
    namespace = await resolve.namespace(request.namespace)
    token = resolve.task_token(namespace, request.task_token)
    validation.command_sequence(request.commands)
    for command in request.commands:
        validation.command_payloads(command)
    result = await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        workflow_tasks.workflow_task_complete,
        namespace=namespace,
        token=token,
        request=request,
    )
    response = rr.RespondWorkflowTaskCompletedResponse(
        activity_tasks=[convert.activity_task_response(namespace, a) for a in result.activities],
        reset_history_event_id=result.reset_history_event_id,
    )
    waits.matched_eagerly(namespace, TaskKind.ACTIVITY, len(result.activities))
    if result.workflow_task is not None:
        waits.matched_eagerly(namespace, TaskKind.WORKFLOW)
        response.workflow_task.CopyFrom(await workflow_task_response(namespace, result.workflow_task))
    return response


async def respond_workflow_task_failed(
    request: rr.RespondWorkflowTaskFailedRequest, context: grpc.aio.ServicerContext
) -> rr.RespondWorkflowTaskFailedResponse:
    namespace = await resolve.namespace(request.namespace)
    token = resolve.task_token(namespace, request.task_token)
    await dbthreads.run_in_turn(
        (namespace.id, token.workflow_id),
        workflow_tasks.workflow_task_fail,
        namespace=namespace,
        token=token,
        cause=request.cause,
        failure=request.failure if request.HasField("failure") else None,
        identity=request.identity,
        binary_checksum=request.binary_checksum,
    )
    return rr.RespondWorkflowTaskFailedResponse()


async def reset_sticky_task_queue(
    request: rr.ResetStickyTaskQueueRequest, context: grpc.aio.ServicerContext
) -> rr.ResetStickyTaskQueueResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    await dbthreads.run_in_turn(
        (namespace.id, request.execution.workflow_id),
        workflow_tasks.sticky_reset,
        namespace=namespace,
        workflow_id=request.execution.workflow_id,
        run_id=request.execution.run_id,
    )
    return rr.ResetStickyTaskQueueResponse()
