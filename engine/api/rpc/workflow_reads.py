"""Reading a run: DescribeWorkflowExecution and its history, forwards (with the long poll `handle.result()`
waits on) and in reverse."""

from __future__ import annotations

import asyncio

import grpc
from temporalio.api.enums.v1 import HistoryEventFilterType, WorkflowExecutionStatus
from temporalio.api.history.v1 import History
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import dbthreads, notify, page_tokens, validation
from engine.api.rpc import resolve, waits
from engine.models import Execution
from engine.services import reads, run_descriptions
from tenants.models import Namespace

HISTORY_WAIT_SECONDS = 20.0
DEFAULT_HISTORY_PAGE = 1000
RUNNING = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
CLOSE_EVENT = HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT


async def _snapshot(namespace: Namespace, workflow_id: str, run_id: str) -> reads.RunSnapshot:
    return await dbthreads.run(
        reads.run_snapshot, namespace_id=namespace.id, workflow_id=workflow_id, run_id=run_id
    )


async def describe_workflow_execution(
    request: rr.DescribeWorkflowExecutionRequest, context: grpc.aio.ServicerContext
) -> rr.DescribeWorkflowExecutionResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    snap = await _snapshot(namespace, request.execution.workflow_id, request.execution.run_id)
    return run_descriptions.describe_execution(snap)


async def get_workflow_execution_history(
    request: rr.GetWorkflowExecutionHistoryRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkflowExecutionHistoryResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    run_id = request.execution.run_id
    first_event_id = 1
    if request.next_page_token:
        run_id, first_event_id = page_tokens.history_decode(request.next_page_token)
    snap = await _snapshot(namespace, request.execution.workflow_id, run_id)
    execution = snap.execution
    close_only = request.history_event_filter_type == CLOSE_EVENT
    if request.wait_new_event:
        execution = await _wait_for_history(context, execution, first_event_id, close_only)

    def token(next_event_id: int) -> bytes:
        return page_tokens.history_encode(run_id=execution.run_id, next_event_id=next_event_id)

    if close_only:
        if execution.status == RUNNING:
            return rr.GetWorkflowExecutionHistoryResponse(
                history=History(), next_page_token=token(first_event_id)
            )
        event = await dbthreads.run(reads.close_event, execution)
        return rr.GetWorkflowExecutionHistoryResponse(history=History(events=[event] if event else []))
    page_size = request.maximum_page_size or DEFAULT_HISTORY_PAGE
    events = await dbthreads.run(
        reads.history_page, execution, first_event_id=first_event_id, page_size=page_size
    )
    next_id = events[-1].event_id + 1 if events else first_event_id
    more = next_id < execution.next_event_id or (request.wait_new_event and execution.status == RUNNING)
    return rr.GetWorkflowExecutionHistoryResponse(
        history=History(events=events), next_page_token=token(next_id) if more else b""
    )


async def _wait_for_history(
    context: grpc.aio.ServicerContext, execution: Execution, first_event_id: int, close_only: bool
) -> Execution:
    """Long-poll until the run has events from `first_event_id` (or has closed), or the wait runs out."""
    loop = asyncio.get_running_loop()
    deadline = waits.deadline(context, HISTORY_WAIT_SECONDS)
    key = notify.closed_key(execution.pk) if close_only else notify.run_key(execution.pk)
    with notify.hub.waiter(key) as waiter:
        while True:
            if execution.status != RUNNING or (not close_only and execution.next_event_id > first_event_id):
                return execution
            remaining = deadline - loop.time()
            if remaining <= 0:
                return execution
            await waiter.wait(min(remaining, waits.RECHECK_SECONDS))
            waiter.rearm()
            execution = await dbthreads.run(reads.reload, execution)


async def get_workflow_execution_history_reverse(
    request: rr.GetWorkflowExecutionHistoryReverseRequest, context: grpc.aio.ServicerContext
) -> rr.GetWorkflowExecutionHistoryReverseResponse:
    namespace = await resolve.namespace(request.namespace)
    validation.require_id(request.execution.workflow_id, "WorkflowId")
    validation.run_id(request.execution.run_id)
    snap = await _snapshot(namespace, request.execution.workflow_id, request.execution.run_id)
    before = snap.execution.next_event_id
    if request.next_page_token:
        before = page_tokens.reverse_decode(request.next_page_token)
    events = await dbthreads.run(
        reads.history_reverse_page,
        snap.execution,
        before_event_id=before,
        page_size=request.maximum_page_size or DEFAULT_HISTORY_PAGE,
    )
    oldest = events[-1].event_id if events else 1
    return rr.GetWorkflowExecutionHistoryReverseResponse(
        history=History(events=events), next_page_token=str(oldest).encode() if oldest > 1 else b""
    )
